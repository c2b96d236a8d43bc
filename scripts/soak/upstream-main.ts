/**
 * The fake OpenAI-compatible upstream of the test suite, run as its own process so the soak
 * can SIGKILL and SIGSTOP it like a real model server. Unlike `bench/fake-upstream-main.ts`
 * it misbehaves on its own too: a seeded share of requests die or stall mid-stream, stall
 * before headers, or answer 429/500, so failover, breakers and the internal-error event run
 * all the time, not only while a fault is injected.
 *
 * Env: PORT (0 = any), CHUNK_DELAY_MS, SOAK_SEED. Prints its base URL on stdout; exits when
 * stdin closes, so it never outlives the soak.
 */
import { startFakeUpstream, type FakeUpstreamMode } from "../../test/support/fake-upstream.ts";
import { createRng } from "./rng.ts";

/** Share of requests answered in each mode; mostly well. */
const MIX: Record<FakeUpstreamMode, number> = {
  ok: 84,
  "no-usage": 3,
  "die-mid-stream": 4,
  "stall-mid-stream": 2,
  "stall-before-headers": 1,
  "status-429": 2,
  "status-500": 3,
  "status-400": 0,
};

const rng = createRng(Number(process.env.SOAK_SEED ?? 1));
const upstream = await startFakeUpstream({
  port: Number(process.env.PORT ?? 0),
  chunkDelayMs: Number(process.env.CHUNK_DELAY_MS ?? 0),
  behave: () => rng.weighted(MIX),
});
// The recorded requests are of no use here and would grow for the whole run.
setInterval(() => {
  upstream.requests.length = 0;
}, 5_000).unref();
process.stdout.write(`fake upstream on ${upstream.url}\n`);
process.stdin.resume();
process.stdin.on("end", () => void upstream.close().then(() => process.exit(0)));
