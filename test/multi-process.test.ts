import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatBody, chatOnce, pool, type ChatOutcome } from "./support/chat-load.ts";
import { expectStructured } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { tryJson } from "./support/http.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";
import { adminOf, spawnFleet, type AdminHandle, type SluiceProcess } from "./support/sluice-process.ts";
import { WebhookDeliveryStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { startWebhookReceiver } from "../src/testing/webhook-receiver.ts";
import { idsByLabel, reached } from "./support/webhooks.ts";

/**
 * DESIGN's billing invariants "across any number of processes sharing Redis", tested with
 * four real `node src/main.ts` processes on one redis-server: a flood of concurrent chat
 * calls against a small cap, and a per-key rate limit that must hold across all four edges.
 */
const PROCESSES = 4;
const ADMIN_TOKEN = "multi-process-admin-token-0123456789";
const CALLS = 2_000;
const IN_FLIGHT = 200;
const CAP = 40_000n;
/** service-extract: 1 micro per input token, 2 per output token. */
const PRICE = { input: 1_000_000, output: 2_000_000 };

let redis: RedisServer | undefined;
let raw: Redis | undefined;
const procs: SluiceProcess[] = [];
let admin: AdminHandle;

beforeAll(async () => {
  redis = await startRedisServer();
  procs.push(
    ...(await spawnFleet({
      count: PROCESSES,
      redisUrl: redis.url,
      adminToken: ADMIN_TOKEN,
      // This suite is about the billing invariants under contention: four servers, Redis and the
      // load share two cores, and a 503 from a starved moment would only be noise here. Stalls
      // and their 503s are tested in redis-frozen.test.ts.
      env: { SLUICE_STORE_TIMEOUT_MS: "3000" },
    })),
  );
  raw = new Redis(redis.url);
  admin = adminOf(procs[0]?.coreUrl ?? "", ADMIN_TOKEN);
}, 60_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  raw?.disconnect();
  await redis?.close();
}, 30_000);

const edge = (i: number) => procs[i % procs.length]?.edgeUrl ?? "";
const periodNow = () => new Date().toISOString().slice(0, 7);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Samples spent + reserved through every process's Admin API, one sample started every 50 ms
 * (not waiting for the previous one, so a busy process cannot thin the samples out), until
 * `done.stopped`. A sample the Admin API fails to answer is counted, not fatal.
 */
async function sampleBalances(
  accountId: string,
  done: { stopped: boolean },
): Promise<{ sums: bigint[]; failed: string[] }> {
  const admins = procs.map((p) => adminOf(p.coreUrl, ADMIN_TOKEN));
  const pending: Array<Promise<bigint | string>> = [];
  for (let i = 0; !done.stopped; i++) {
    const client = admins[i % admins.length] ?? admin;
    pending.push(
      balanceOf(client, accountId).then(
        (b) => b.spent + b.reserved,
        (err: unknown) => String(err),
      ),
    );
    await sleep(50);
  }
  const results = await Promise.all(pending);
  return { sums: results.filter((r) => typeof r === "bigint"), failed: results.filter((r) => typeof r === "string") };
}

describe("four Sluice processes sharing one Redis", () => {
  it("2,000 concurrent calls never pass the cap; charges, records and holds add up exactly", async () => {
    const { accountId, apiKey } = await admin.newAccount(CAP, 100_000, 100_000);
    const period = periodNow();
    const sampling = { stopped: false };
    const sampler = sampleBalances(accountId, sampling);
    const started = Date.now();
    // A third stream; max_tokens small (8, 16), roomy (64), large (1024) or missing (4,096).
    const maxTokensOf = (i: number) => [8, 16, 64, 1024, undefined][i % 5];
    const outcomes = await pool(CALLS, IN_FLIGHT, (i) =>
      chatOnce(edge(i), apiKey, chatBody(i, i % 3 === 0, maxTokensOf(i))),
    );
    const seconds = (Date.now() - started) / 1000;
    sampling.stopped = true;
    const { sums: samples, failed: failedSamples } = await sampler;

    const of = <K extends ChatOutcome["kind"]>(kind: K) =>
      outcomes.filter((o): o is Extract<ChatOutcome, { kind: K }> => o.kind === kind);
    const json = of("json");
    const done = of("sse-done");
    const aborted = of("sse-abort");
    const refused = of("refused");
    const other = of("other");
    const balance = await balanceOf(admin, accountId);
    const records = await usageRecordsOf(admin, accountId);
    const partial = BigInt((await raw?.get(`sluice:{a:${accountId}}:p:${period}:partial`)) ?? "0");
    const recordSum = records.reduce((sum, r) => sum + r.costUsdMicros, 0n);
    const maxSample = samples.reduce((m, s) => (s > m ? s : m), 0n);
    console.log(
      `[multi-process billing] ${CALLS} calls over ${PROCESSES} processes in ${seconds.toFixed(1)} s ` +
        `(${(CALLS / seconds).toFixed(0)} req/s): ${json.length} JSON + ${done.length} SSE completed, ` +
        `${aborted.length} SSE spend-cap aborts, ${refused.length} x 402, ${other.length} other; ` +
        `cap ${CAP}, spent ${balance.spent} (records ${recordSum} + partial ${partial}), ` +
        `reserved ${balance.reserved}, ${records.length} records, ` +
        `${samples.length} balance samples (max ${maxSample}, ${failedSamples.length} failed)`,
    );
    if (failedSamples.length > 0) console.log("[multi-process billing] failed balance samples:", failedSamples[0]);
    if (other.length > 0)
      console.log(
        "[multi-process billing] unexpected:",
        other
          .slice(0, 5)
          .map((o) => JSON.stringify(o))
          .join("\n"),
      );

    // Soft checks: one run reports every broken invariant, not only the first.
    expect
      .soft(
        other.slice(0, 5).map((o) => JSON.stringify(o)),
        `${other.length} unexpected outcomes`,
      )
      .toEqual([]);
    expect(outcomes).toHaveLength(CALLS);
    expect.soft(json.length + done.length, "completed calls").toBeGreaterThan(0);
    expect.soft(refused.length, "402 refusals").toBeGreaterThan(0);
    expect
      .soft(
        refused.filter((r) => !(r.retryAfter >= 1)),
        "402s without Retry-After >= 1",
      )
      .toEqual([]);

    // At every sampled instant, and at the end: spent + live holds within the cap.
    expect.soft(samples.length, "balance samples").toBeGreaterThan(0);
    expect
      .soft(
        samples.filter((s) => s > CAP),
        "samples above the cap",
      )
      .toEqual([]);
    expect.soft(balance.cap).toBe(CAP);
    expect.soft(balance.spent, "spent <= cap").toBeLessThanOrEqual(CAP);
    const holds = await raw?.hlen(`sluice:{a:${accountId}}:p:${period}:resv`);
    expect
      .soft({ reserved: balance.reserved, holds }, "no live reservation once every call has ended")
      .toEqual({ reserved: 0n, holds: 0 });

    // Exactly one record per completed call, none for anything else.
    const completedIds = [...json, ...done].map((o) => o.id);
    expect.soft(new Set(completedIds).size, "distinct completion ids").toBe(completedIds.length);
    expect
      .soft(records.map((r) => r.id).sort(), "usage record ids = completed call ids")
      .toEqual([...completedIds].sort());
    const usageById = new Map([...json, ...done].map((o) => [o.id, o.usage]));
    for (const r of records) {
      const usage = usageById.get(r.id);
      expect
        .soft({ id: r.id, p: r.promptTokens, c: r.completionTokens })
        .toEqual({ id: r.id, p: BigInt(usage?.prompt_tokens ?? -1), c: BigInt(usage?.completion_tokens ?? -1) });
      const cost = Math.ceil(
        (Number(r.promptTokens) * PRICE.input + Number(r.completionTokens) * PRICE.output) / 1_000_000,
      );
      expect.soft(r.costUsdMicros, `cost of ${r.id}`).toBe(BigInt(cost));
    }

    // Spent is the records plus the delivered part of aborted streams, and nothing else.
    expect.soft(balance.spent, "spent = records + partial").toBe(recordSum + partial);
    expect.soft(partial).toBeGreaterThanOrEqual(0n);
    expect.soft(partial, "partial <= cap - records").toBeLessThanOrEqual(CAP - recordSum);
    if (aborted.length === 0) expect.soft(partial, "no abort, no partial charge").toBe(0n);
    // Each abort is charged at most its prompt plus 2 micros per delivered token (1 per chunk here).
    const prompts = [...json, ...done].map((o) => o.usage.prompt_tokens);
    const maxPrompt = (prompts.length > 0 ? Math.max(...prompts) : 60) + 4;
    const abortBound = aborted.reduce((sum, a) => sum + maxPrompt + 2 * a.contentChunks, 0);
    expect.soft(partial, "partial <= aborts' prompts + delivered chunks").toBeLessThanOrEqual(BigInt(abortBound));
  }, 120_000);

  it("a key's own cap and its account's cap both hold across four processes hammering two keys", async () => {
    const KEY_CAP = 5_000n;
    const ACCOUNT_CAP = 12_000n;
    const calls = 1_200;
    const { accountId, apiKey: bigKey } = await admin.newAccount(ACCOUNT_CAP, 100_000, 100_000);
    const made = await admin.admin.createApiKey(
      { accountId, rateLimitRps: 100_000, burst: 100_000, spendCapUsdMicros: KEY_CAP },
      { headers: admin.adminHeaders },
    );
    const smallId = made.apiKey?.id ?? "";
    const period = periodNow();
    // Two calls of three use the capped key: its demand is far above its cap, the account's too.
    const keyOf = (i: number) => (i % 3 === 2 ? "big" : "small");
    const sampling = { stopped: false };
    const admins = procs.map((p) => adminOf(p.coreUrl, ADMIN_TOKEN));
    const keySamples: Array<Promise<bigint | undefined>> = [];
    const sampler = (async () => {
      for (let i = 0; !sampling.stopped; i++) {
        const client = admins[i % admins.length] ?? admin;
        const sample = client.admin.listApiKeys({ accountId }, { headers: client.adminHeaders }).then(
          ({ apiKeys }) => {
            const k = apiKeys.find((a) => a.id === smallId);
            return k && k.spentUsdMicros + k.reservedUsdMicros;
          },
          () => undefined,
        );
        keySamples.push(sample);
        await sleep(50);
      }
    })();
    const accountSampler = sampleBalances(accountId, sampling);
    const outcomes = await pool(calls, 150, (i) =>
      chatOnce(
        edge(i),
        keyOf(i) === "big" ? bigKey : made.secret,
        chatBody(i, i % 2 === 0, [8, 64, undefined, 16][i % 4]),
      ),
    );
    sampling.stopped = true;
    await sampler;
    const samples = (await Promise.all(keySamples)).filter((s): s is bigint => s !== undefined);
    const { sums: accountSamples } = await accountSampler;

    const records = await usageRecordsOf(admin, accountId);
    const partials = (await raw?.hgetall(`sluice:{a:${accountId}}:p:${period}:partials`)) ?? {};
    const keySpent = (await raw?.hgetall(`sluice:{a:${accountId}}:p:${period}:key-spent`)) ?? {};
    const balance = await balanceOf(admin, accountId);
    const { apiKeys } = await admin.admin.listApiKeys({ accountId }, { headers: admin.adminHeaders });
    /** The ledger of one key: its usage records plus the partial charges of its aborted streams. */
    const ledgerOf = (key: "small" | "big", apiKeyId: string) => {
      const recorded = records.filter((r) => r.apiKeyId === apiKeyId).reduce((s, r) => s + r.costUsdMicros, 0n);
      const aborted = outcomes.flatMap((o, i) => (o.kind === "sse-abort" && o.id && keyOf(i) === key ? [o.id] : []));
      return recorded + aborted.reduce((s, id) => s + BigInt(partials[id] ?? "0"), 0n);
    };
    const bigId = apiKeys.find((k) => k.id !== smallId)?.id ?? "";
    const small = ledgerOf("small", smallId);
    const big = ledgerOf("big", bigId);
    const kinds = new Map<string, number>();
    for (const o of outcomes) kinds.set(o.kind, (kinds.get(o.kind) ?? 0) + 1);
    const maxSample = samples.reduce((m, s) => (s > m ? s : m), 0n);
    console.log(
      `[multi-process key caps] ${calls} calls over ${PROCESSES} processes: ` +
        `${JSON.stringify(Object.fromEntries(kinds))}; key cap ${KEY_CAP}: ledger ${small} ` +
        `(${samples.length} samples, max ${maxSample}); account cap ${ACCOUNT_CAP}: spent ${balance.spent} ` +
        `(other key ${big})`,
    );

    expect.soft(outcomes.filter((o) => o.kind === "other").slice(0, 3), "unexpected outcomes").toEqual([]);
    expect.soft(small, "the capped key's records + partials").toBeLessThanOrEqual(KEY_CAP);
    expect.soft(small, "the capped key spent most of its cap").toBeGreaterThan(KEY_CAP / 2n);
    expect.soft(balance.spent, "the account's spend").toBeLessThanOrEqual(ACCOUNT_CAP);
    // The other key has no cap of its own: its 402s are the account's cap refusing.
    const refusedOf = (key: string) => outcomes.filter((o, i) => o.kind === "refused" && keyOf(i) === key).length;
    expect.soft(refusedOf("small"), "402s of the capped key").toBeGreaterThan(0);
    expect.soft(refusedOf("big"), "402s of the account's cap").toBeGreaterThan(0);
    expect.soft(small + big, "spent = both keys' ledgers").toBe(balance.spent);
    expect.soft({ small: keySpent[smallId], big: keySpent[bigId] }, "the store's key sums = the ledgers").toEqual({
      small: String(small),
      big: String(big),
    });
    expect.soft(apiKeys.find((k) => k.id === smallId)?.spentUsdMicros, "Admin's key spend").toBe(small);
    expect.soft(samples.length, "key samples").toBeGreaterThan(0);
    expect
      .soft(
        samples.filter((s) => s > KEY_CAP),
        "key samples above its cap",
      )
      .toEqual([]);
    expect
      .soft(
        accountSamples.filter((s) => s > ACCOUNT_CAP),
        "account samples above its cap",
      )
      .toEqual([]);
    expect.soft(balance.reserved, "nothing held at the end").toBe(0n);
  }, 120_000);

  it("raises each spend alert exactly once across four processes, and one of them delivers it", async () => {
    const ACCOUNT_CAP = 20_000n;
    const KEY_CAP = 6_000n;
    const receiver = await startWebhookReceiver();
    try {
      const { accountId, apiKey } = await admin.newAccount(ACCOUNT_CAP, 100_000, 100_000);
      const headers = { headers: admin.adminHeaders };
      const capped = await admin.admin.createApiKey(
        { accountId, rateLimitRps: 100_000, burst: 100_000, spendCapUsdMicros: KEY_CAP },
        headers,
      );
      const keyId = capped.apiKey?.id ?? "";
      // Created on one process, the endpoint is read by the dispatchers of all four.
      const { endpoint, secret } = await admin.admin.createWebhookEndpoint({ url: receiver.url, accountId }, headers);
      receiver.setSecret(secret);
      const outcomes = await pool(600, 120, (i) =>
        chatOnce(edge(i), i % 3 === 2 ? capped.secret : apiKey, chatBody(i, i % 2 === 0, [8, 64, 16][i % 3])),
      );
      expect.soft(outcomes.filter((o) => o.kind === "other").slice(0, 3), "unexpected outcomes").toEqual([]);
      // The default thresholds, read against what each cap's final spend reached.
      const percents = [50, 80, 100];
      const { spent } = await balanceOf(admin, accountId);
      const { apiKeys } = await admin.admin.listApiKeys({ accountId }, headers);
      const keySpent = apiKeys.find((k) => k.id === keyId)?.spentUsdMicros ?? 0n;
      const expected = [
        ...reached(percents, ACCOUNT_CAP, spent),
        ...reached(percents, KEY_CAP, keySpent, keyId),
      ].sort();
      expect(expected.length, "thresholds the calls crossed").toBeGreaterThanOrEqual(4);

      const got = await receiver.until((r) => Object.keys(idsByLabel(r)).length >= expected.length, 30_000);
      const deliveries = async () =>
        (await admin.admin.listWebhookDeliveries({ endpointId: endpoint?.id ?? "" }, headers)).deliveries;
      await expect
        .poll(async () => (await deliveries()).filter((d) => d.status === WebhookDeliveryStatus.DELIVERED).length)
        .toBe(expected.length);
      // Nothing is left in an outbox or the queue that could still show up as a second alert.
      expect(await raw?.exists(`sluice:{a:${accountId}}:alerts-outbox`)).toBe(0);
      expect(await raw?.xlen("sluice:{wh}:queue")).toBe(0);
      const fired = await raw?.smembers(`sluice:{a:${accountId}}:p:${periodNow()}:alerts-fired`);
      console.log(
        `[multi-process spend alerts] spent ${spent} of ${ACCOUNT_CAP}, key ${keySpent} of ${KEY_CAP}: ` +
          `${expected.length} thresholds, ${receiver.received.length} requests, fired ${JSON.stringify(fired)}`,
      );
      expect(Object.keys(idsByLabel(got))).toEqual(expected);
      expect(
        Object.values(idsByLabel(receiver.received)).every((n) => n === 1),
        "one webhook-id per threshold",
      ).toBe(true);
      expect(fired?.length).toBe(expected.length);
      expect(await deliveries()).toHaveLength(expected.length);
      expect(
        receiver.received.every((r) => r.verified),
        "every signature verified",
      ).toBe(true);
    } finally {
      await receiver.close();
    }
  }, 120_000);

  it("a key's rate limit holds across all four edges", async () => {
    const RPS = 5;
    const BURST = 5;
    const OFFERED = 40;
    const DURATION_MS = 3_000;
    const { accountId, apiKey } = await admin.newAccount(10_000_000n, RPS, BURST);
    const replies: Array<Promise<{ status: number; headers: Headers; text: string }>> = [];
    const started = Date.now();
    for (let i = 0; Date.now() - started < DURATION_MS; i++) {
      const due = started + (i * 1000) / OFFERED;
      if (due > Date.now()) await sleep(due - Date.now());
      replies.push(
        fetch(`${edge(i)}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } }).then(async (res) => ({
          status: res.status,
          headers: res.headers,
          text: await res.text(),
        })),
      );
    }
    const settled = await Promise.all(replies);
    const elapsed = (Date.now() - started) / 1000;
    const allowed = settled.filter((r) => r.status === 200);
    const denied = settled.filter((r) => r.status === 429);
    console.log(
      `[multi-process rate limit] ${settled.length} requests in ${elapsed.toFixed(2)} s ` +
        `(${(settled.length / elapsed).toFixed(1)} req/s offered over ${PROCESSES} edges): ` +
        `${allowed.length} allowed, ${denied.length} denied; ` +
        `limit ${RPS}/s burst ${BURST} -> expected about ${(BURST + RPS * elapsed).toFixed(1)}`,
    );

    expect(allowed.length + denied.length).toBe(settled.length);
    expect(allowed.length).toBeLessThanOrEqual(BURST + RPS * elapsed + 2);
    expect(allowed.length).toBeGreaterThanOrEqual(RPS * elapsed * 0.7);
    for (const r of allowed) expect(tryJson(r.text)).toEqual({ id: accountId, email: null });
    for (const r of denied) {
      expectStructured({ ...r, json: tryJson(r.text) }, 429, "api_key_rate_limited", "rate_limit_error");
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    }
  }, 60_000);
});
