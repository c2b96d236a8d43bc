import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, expectRetryAfter, expectStructured } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { sleep } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat, tryJson, type Reply } from "./support/http.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";
import { chunksOf, parseSse } from "./support/sse.ts";
import { SLOW_MODEL, SLOW_PACE, slowModels } from "./support/slow-model.ts";
import { contentDeltas, readStream } from "./support/stream-reader.ts";

/**
 * A Redis that stalls instead of dying (SIGSTOP): its connections stay open and nothing
 * answers, the failure a fail-fast client cannot see at once. Store-specific on purpose: the
 * file spawns its own redis-server whatever SLUICE_TEST_STORE says.
 */

/** DESIGN and issue 7: a call gets its 503 within this of a store that stops answering. */
const ANSWER_WITHIN_MS = 1000;

async function timedGet(app: TestApp, path: string, apiKey?: string): Promise<{ reply: Reply; ms: number }> {
  const started = performance.now();
  const res = await fetch(`${app.edgeUrl}${path}`, {
    ...(apiKey !== undefined && { headers: { authorization: `Bearer ${apiKey}` } }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return {
    reply: { status: res.status, headers: res.headers, text, json: tryJson(text) },
    ms: performance.now() - started,
  };
}

describe("a frozen Redis (SIGSTOP)", () => {
  let redis: RedisServer;
  let app: TestApp;

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: true });
    app = await startTestApp({ REDIS_URL: redis.url, SLUICE_RESERVATION_TTL_MS: "3000" }, { models: slowModels() });
  });
  afterAll(async () => {
    redis?.thaw();
    await app?.close();
    await redis?.close();
  });

  it("chat, /v1/me, /readyz: 503 + Retry-After within 1 s; holds taken meanwhile released after the thaw", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    // The key is cached: the freeze is met past authentication, at the admission.
    expect((await timedGet(app, "/v1/me", apiKey)).reply.status).toBe(200);
    redis.freeze();
    try {
      const sends: Array<[string, () => Promise<{ reply: Reply; ms: number }>]> = [
        [
          "chat JSON",
          async () => {
            const t = performance.now();
            const reply = await postChat(app, apiKey, { messages: CHAT_MESSAGES });
            return { reply, ms: performance.now() - t };
          },
        ],
        [
          "chat SSE",
          async () => {
            const t = performance.now();
            const reply = await postChat(app, apiKey, { model: SLOW_MODEL, stream: true, messages: CHAT_MESSAGES });
            return { reply, ms: performance.now() - t };
          },
        ],
        ["/v1/me", () => timedGet(app, "/v1/me", apiKey)],
      ];
      for (const [name, send] of sends) {
        const { reply, ms } = await send();
        expect(reply.status, `${name}: ${reply.text}`).toBe(503);
        expectStructured(reply, 503, "service_unavailable", "service_unavailable");
        expectRetryAfter(reply);
        expect(ms, `${name} answered in ${ms.toFixed(0)} ms`).toBeLessThan(ANSWER_WITHIN_MS);
      }
      const readyz = await timedGet(app, "/readyz");
      expect(readyz.reply.status).toBe(503);
      expect(readyz.ms).toBeLessThan(ANSWER_WITHIN_MS);
      expect((await timedGet(app, "/healthz")).reply.status).toBe(200);
    } finally {
      redis.thaw();
    }
    // The admissions ran when Redis thawed; their holds are released by completion id.
    await eventually(
      async () => expect(await balanceOf(app, accountId)).toMatchObject({ spent: 0n, reserved: 0n }),
      10_000,
    );
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });

  it("a stream whose settle meets the freeze is told what the ledger says: billed once it lands", async () => {
    // A first call loads the settle script, so the frozen settle is one EVALSHA that runs
    // when Redis thaws (a NOSCRIPT retry would come after the resolving release, and be
    // refused: consistent too, but not billed).
    const warm = await app.newAccount({ rps: 1000, burst: 1000 });
    expect((await postChat(app, warm.apiKey, { messages: CHAT_MESSAGES })).status).toBe(200);
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: SLOW_MODEL, messages: CHAT_MESSAGES, stream: true }),
      signal: AbortSignal.timeout(60_000),
    });
    expect(res.status).toBe(200);
    const stream = readStream(res.body as ReadableStream<Uint8Array>);
    await stream.until((text) => contentDeltas(text).length >= SLOW_PACE.deltas - 10, 20_000);
    redis.freeze();
    try {
      // The engine finishes during the freeze, so its settle is sent to the frozen server and
      // its reply times out. The old code gave up after about 6 s and said "not billed".
      await stream.until((text) => contentDeltas(text).length >= SLOW_PACE.deltas, 20_000);
      await sleep(8000);
    } finally {
      redis.thaw();
    }
    const { text } = await stream.end;
    const frames = parseSse(text);
    const data = frames.map((f) => f.data);
    expect(data.at(-1)).toBe("[DONE]");
    expect(data).not.toContain('{"error":"service_unavailable","status":500}');
    const usage = chunksOf(frames.slice(0, -1)).find((c) => c.usage !== undefined);
    expect(usage, "the usage chunk of a billed call").toBeDefined();
    const records = await usageRecordsOf(app, accountId);
    expect(records).toHaveLength(1);
    expect(records[0]?.id).toBe(usage?.id);
    expect(await balanceOf(app, accountId)).toMatchObject({ spent: records[0]?.costUsdMicros, reserved: 0n });
  }, 60_000);
});
