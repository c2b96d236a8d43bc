import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeSecrets, type Round, within } from "./support/key-probes.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";
import { adminOf, spawnFleet, type AdminHandle, type SluiceProcess } from "./support/sluice-process.ts";

/**
 * Issue 11, key rotation across processes: three `node src/main.ts` processes on one
 * redis-server, each with its own key cache. A rotation made through one is honoured by all:
 * the new secret works everywhere from the moment it is issued, the old one everywhere until its
 * grace period ends, and never does a call find neither working. The processes run on the
 * machine's clock, so the phases are bounded by the times the rotation was sent and answered:
 * the grace began between the two.
 */
const PROCESSES = 3;
const ADMIN_TOKEN = "key-rotation-admin-token-0123456789";
const OK = "200";
const REFUSED = "401 invalid_api_key";
/** DESIGN: a change shows in every process within 1 s, even if its cached copy was never dropped. */
const CACHE_BOUND_MS = 1_000;

let redis: RedisServer | undefined;
const procs: SluiceProcess[] = [];
let admin: AdminHandle;

beforeAll(async () => {
  redis = await startRedisServer();
  procs.push(...(await spawnFleet({ count: PROCESSES, redisUrl: redis.url, adminToken: ADMIN_TOKEN })));
  admin = adminOf(procs[0]?.coreUrl ?? "", ADMIN_TOKEN);
}, 60_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await redis?.close();
}, 30_000);

const edges = () => procs.map((p) => p.edgeUrl);
/** Resolves once the machine's clock has passed `ms` (a deadline the processes share, not a guess). */
const until = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms - Date.now()) + 1));

/** Rotates through the first process, returning the secret and when the call was sent and answered. */
async function rotate(apiKeyId: string, graceMs: number) {
  const sentMs = Date.now();
  const { secret } = await admin.admin.rotateApiKey(
    { apiKeyId, gracePeriod: durationFromMs(graceMs) },
    { headers: admin.adminHeaders },
  );
  return { secret, sentMs, answeredMs: Date.now() };
}

/** The distinct outcomes of one secret over some rounds. */
const seen = (rounds: Round[], secret: "old" | "new") => [...new Set(rounds.map((r) => r[secret]))];

describe(`${PROCESSES} Sluice processes sharing one Redis: rotating a key`, () => {
  it("the new secret works in every process at once; the old one until its grace ends; never neither", async () => {
    const GRACE_MS = 2_000;
    const { apiKey, accountId } = await admin.newAccount(10_000_000n, 1_000_000, 1_000_000);
    const [key] = (await admin.admin.listApiKeys({ accountId }, { headers: admin.adminHeaders })).apiKeys;
    const prober = probeSecrets({ edges: edges(), oldSecret: apiKey });
    await prober.rounds(5); // every process has the old secret cached now
    prober.phase("rotating");
    const { secret, sentMs, answeredMs } = await rotate(key?.id ?? "", GRACE_MS);
    prober.phase("grace", secret);
    await prober.rounds(10);
    await until(answeredMs + GRACE_MS);
    prober.phase("after");
    await prober.rounds(10);
    const rounds = await prober.stop();
    console.log(`[key rotation across processes] ${rounds.length} rounds over ${PROCESSES} processes`);

    expect(rounds.filter((r) => r.old !== OK && r.new !== OK)).toEqual([]);
    expect(rounds.filter((r) => r.new === undefined && r.old !== OK)).toEqual([]);
    expect(seen(rounds, "new")).toEqual(expect.arrayContaining([OK]));
    expect(rounds.filter((r) => r.new !== undefined && r.new !== OK)).toEqual([]);
    // Ended before the grace could have ended (it began no earlier than the call was sent).
    expect(
      seen(
        rounds.filter((r) => r.endedMs < sentMs + GRACE_MS),
        "old",
      ),
    ).toEqual([OK]);
    // Began after it had surely ended (it began no later than the call was answered).
    const after = within(rounds, "after");
    expect(after.length).toBeGreaterThanOrEqual(10 * PROCESSES);
    expect(after.filter((r) => r.startedMs < answeredMs + GRACE_MS)).toEqual([]);
    expect({ old: seen(after, "old"), new: seen(after, "new") }).toEqual({ old: [REFUSED], new: [OK] });
  }, 60_000);

  it("with no grace: the new secret works everywhere at once, the old one stops everywhere within 1 s", async () => {
    const { apiKey, accountId } = await admin.newAccount(10_000_000n, 1_000_000, 1_000_000);
    const [key] = (await admin.admin.listApiKeys({ accountId }, { headers: admin.adminHeaders })).apiKeys;
    const prober = probeSecrets({ edges: edges(), oldSecret: apiKey });
    await prober.rounds(5);
    prober.phase("rotating");
    const { secret, sentMs, answeredMs } = await rotate(key?.id ?? "", 0);
    prober.phase("issued", secret);
    await prober.rounds(5);
    await until(answeredMs + CACHE_BOUND_MS);
    prober.phase("after");
    await prober.rounds(10);
    const rounds = await prober.stop();

    expect(
      seen(
        rounds.filter((r) => r.endedMs < sentMs),
        "old",
      ),
    ).toEqual([OK]);
    expect(seen(within(rounds, "issued"), "new")).toEqual([OK]);
    const after = within(rounds, "after");
    expect({ old: seen(after, "old"), new: seen(after, "new") }).toEqual({ old: [REFUSED], new: [OK] });
  }, 60_000);
});
