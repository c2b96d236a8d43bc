/** Runs the test suite's fake OpenAI-compatible upstream as its own process, for benchmarks. */
import { startFakeUpstream } from "../test/support/fake-upstream.ts";

const upstream = await startFakeUpstream({
  port: Number(process.env.PORT ?? 0),
  chunkDelayMs: Number(process.env.CHUNK_DELAY_MS ?? 0),
});
process.stdout.write(`${upstream.url}\n`);
process.stdin.resume();
process.stdin.on("end", () => void upstream.close().then(() => process.exit(0)));
