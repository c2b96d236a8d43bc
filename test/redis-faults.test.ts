import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, expectRetryAfter, expectStructured } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { sleep } from "./support/engines.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat, tryJson, type Reply } from "./support/http.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";
import { spawnSlowSluice, type SluiceProcess } from "./support/sluice-process.ts";
import { chunksOf, parseSse, streamedText } from "./support/sse.ts";
import { SLOW_MODEL, SLOW_PACE, slowModels } from "./support/slow-model.ts";
import { contentDeltas, readStream, type StreamReader } from "./support/stream-reader.ts";

/**
 * Redis fault tests (DESIGN: "Redis failures are 503 with Retry-After, never a hang"; billing
 * invariants under failure). Store-specific on purpose: every describe spawns redis-server(s)
 * of its own and kills them, whatever SLUICE_TEST_STORE says, so the file runs the same in the
 * e2e-memory and e2e-redis projects.
 */

/** SPEC's in-stream internal-error payload, byte for byte. */
const STREAM_INTERNAL_ERROR = '{"error":"service_unavailable","status":500}';
/** A request that gets no answer within this is a hang, reported as such. */
const HANG_MS = 10_000;
/** The answer time a Redis outage must stay under (fail fast, not the 800 ms command timeout plus more). */
const FAIL_FAST_MS = 1000;

/** The words the slow model emits, in order. */
const SLOW_TEXT = Array.from({ length: SLOW_PACE.deltas }, (_, i) => ` w${i}`).join("");

/** Runs a request with a hang guard and measures its wall time. */
async function timed(
  name: string,
  send: (signal: AbortSignal) => Promise<Reply>,
): Promise<{ reply: Reply; ms: number }> {
  const started = performance.now();
  try {
    const reply = await send(AbortSignal.timeout(HANG_MS));
    return { reply, ms: performance.now() - started };
  } catch (err) {
    throw new Error(
      `${name}: no answer within ${HANG_MS} ms (a hang?): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** A GET on the edge, as a Reply. */
async function get(app: TestApp, path: string, apiKey?: string, signal?: AbortSignal): Promise<Reply> {
  const res = await fetch(`${app.edgeUrl}${path}`, {
    ...(apiKey !== undefined && { headers: { authorization: `Bearer ${apiKey}` } }),
    ...(signal && { signal }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: tryJson(text) };
}

/** Polls `/readyz` until it answers 200; returns how long that took. Fails after `timeoutMs`. */
async function waitReady(app: TestApp, timeoutMs: number): Promise<number> {
  const started = performance.now();
  let last = "no answer";
  while (performance.now() - started < timeoutMs) {
    try {
      const reply = await get(app, "/readyz", undefined, AbortSignal.timeout(3000));
      if (reply.status === 200) return performance.now() - started;
      last = `${reply.status} ${reply.text}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(100);
  }
  throw new Error(`/readyz not 200 within ${timeoutMs} ms; last: ${last}`);
}

/** Starts a streaming chat call and returns a live reader of its SSE body (after checking the 200). */
async function startStream(edgeUrl: string, apiKey: string): Promise<StreamReader> {
  const res = await fetch(`${edgeUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model: SLOW_MODEL, messages: CHAT_MESSAGES, stream: true }),
    signal: AbortSignal.timeout(30_000),
  });
  if (res.status !== 200 || !res.body) throw new Error(`stream not started: ${res.status} ${await res.text()}`);
  expect(res.headers.get("content-type") ?? "").toMatch(/^text\/event-stream/);
  return readStream(res.body);
}

/** Reads Redis INFO sections straight from the server, bypassing the app. */
async function redisInfo(url: string, section: string): Promise<string> {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on("error", () => undefined);
  try {
    await client.connect();
    return await client.info(section);
  } finally {
    client.disconnect();
  }
}

/** A counter from INFO text (`name:count=N,...` or `name:calls=N,...` or `name:N`), 0 when absent. */
function infoCount(info: string, name: string, field?: string): number {
  const line = info.split("\r\n").find((l) => l.startsWith(`${name}:`));
  if (line === undefined) return 0;
  const value = line.slice(name.length + 1);
  if (field === undefined) return Number(value);
  const match = new RegExp(`(?:^|,)${field}=(\\d+)`).exec(value);
  return match ? Number(match[1]) : 0;
}

describe("Redis outage and recovery: one app, an AOF redis-server of its own", () => {
  let redis: RedisServer;
  let app: TestApp;
  let down = false;
  /** Short, so that a hold a failed settle leaves behind is seen to expire within the test. */
  const TTL_MS = 3000;

  const stopRedis = async () => {
    down = true;
    await redis.stop(true);
  };
  /** Every test leaves Redis up and the app ready, whatever happened. */
  const restoreRedis = async () => {
    if (!down) return;
    await redis.start();
    down = false;
    await waitReady(app, 10_000);
  };

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: true });
    app = await startTestApp(
      { REDIS_URL: redis.url, SLUICE_RESERVATION_TTL_MS: String(TTL_MS) },
      { models: slowModels() },
    );
  });

  afterAll(async () => {
    await app?.close();
    await redis?.close();
  });

  it("Redis down: chat and /v1/me get a structured 503 + Retry-After in < 1 s; /healthz 200, /readyz 503", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    // A first call puts the key in the app's cache: the outage is then met past authentication too.
    expect((await get(app, "/v1/me", apiKey)).status).toBe(200);

    await stopRedis();
    try {
      const requests: Array<[string, (signal: AbortSignal) => Promise<Reply>]> = [
        ["GET /v1/me", (signal) => get(app, "/v1/me", apiKey, signal)],
        [
          "POST /v1/chat/completions",
          (signal) => postChat(app, apiKey, { model: "service-extract", messages: CHAT_MESSAGES }, { signal }),
        ],
        [
          "POST /v1/chat/completions (stream)",
          (signal) => postChat(app, apiKey, { model: SLOW_MODEL, messages: CHAT_MESSAGES, stream: true }, { signal }),
        ],
      ];
      // Several rounds: right after the kill, and while the client is reconnecting.
      const times: number[] = [];
      for (let round = 0; round < 3; round++) {
        for (const [name, send] of requests) {
          const { reply, ms } = await timed(name, send);
          expect(reply.status, `${name} (round ${round}): ${reply.text}`).toBe(503);
          expectStructured(reply, 503, "service_unavailable", "service_unavailable");
          expectRetryAfter(reply);
          expect(ms, `${name} (round ${round}) answered in ${ms.toFixed(0)} ms`).toBeLessThan(FAIL_FAST_MS);
          times.push(ms);
        }
        await sleep(200);
      }
      // A dead server is refused at once (no offline queue), not waited on until the 800 ms
      // command timeout: the median answer is far below it even on a loaded machine.
      const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)] ?? Infinity;
      expect(median, `answer times: ${times.map((t) => t.toFixed(0)).join(", ")} ms`).toBeLessThan(400);

      const healthz = await timed("/healthz", (signal) => get(app, "/healthz", undefined, signal));
      expect(healthz.reply.status).toBe(200);
      const readyz = await timed("/readyz", (signal) => get(app, "/readyz", undefined, signal));
      expect(readyz.reply.status).toBe(503);
      expect(Number(readyz.reply.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    } finally {
      await restoreRedis();
    }

    // Refused calls leave nothing behind.
    expect(await balanceOf(app, accountId)).toMatchObject({ spent: 0n, reserved: 0n });
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });

  it("Redis back with no scripts loaded: the same app recovers; /readyz 200, then a chat call is billed", async () => {
    // Made before the outage: AOF keeps it across the restart.
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    expect((await get(app, "/v1/me", apiKey)).status).toBe(200);
    expect(
      infoCount(await redisInfo(redis.url, "memory"), "number_of_cached_scripts"),
      "the app has loaded its scripts",
    ).toBeGreaterThan(0);

    await stopRedis();
    try {
      expect((await get(app, "/v1/me", apiKey)).status).toBe(503);
    } finally {
      await redis.start();
      down = false;
    }

    const readyMs = await waitReady(app, 5000);
    expect(readyMs).toBeLessThan(5000);
    // A new server process: its script cache starts empty, so the first EVALSHA of each script
    // meets NOSCRIPT. (A release still chasing a call refused during the outage may already
    // have loaded its own script: at most that one is cached yet.)
    expect(infoCount(await redisInfo(redis.url, "memory"), "number_of_cached_scripts")).toBeLessThanOrEqual(1);

    const reply = await postChat(app, apiKey, { model: "service-extract", messages: CHAT_MESSAGES });
    expect(reply.status, reply.text).toBe(200);
    const body = reply.json as { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(body.usage.completion_tokens).toBeGreaterThan(0);

    // The scripts were refused with NOSCRIPT, sent again with EVAL, and are cached again.
    const errors = await redisInfo(redis.url, "errorstats");
    expect(infoCount(errors, "errorstat_NOSCRIPT", "count"), errors).toBeGreaterThan(0);
    // The chat call's rate-limit and settle scripts were both loaded again through EVAL.
    expect(infoCount(await redisInfo(redis.url, "commandstats"), "cmdstat_eval", "calls")).toBeGreaterThanOrEqual(2);
    expect(infoCount(await redisInfo(redis.url, "memory"), "number_of_cached_scripts")).toBeGreaterThan(0);

    // Billed: 1 + 2 micros per token in and out (registryWith prices), one usage record.
    const expected = BigInt(body.usage.prompt_tokens + 2 * body.usage.completion_tokens);
    expect(await balanceOf(app, accountId)).toMatchObject({ spent: expected, reserved: 0n });
    const records = await usageRecordsOf(app, accountId);
    expect(records.map((r) => ({ id: r.id, cost: r.costUsdMicros }))).toEqual([{ id: body.id, cost: expected }]);
    expect((await get(app, "/v1/me", apiKey)).status).toBe(200);
  });

  it("a stream in flight when Redis dies ends with the internal-error event and [DONE], uncharged", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const stream = await startStream(app.edgeUrl, apiKey);
    await stream.until((text) => contentDeltas(text).length >= 3, 10_000);
    const held = await balanceOf(app, accountId);
    expect(held.reserved).toBeGreaterThan(0n);
    expect(held.spent).toBe(0n);

    await stopRedis();
    try {
      const { text, error } = await stream.end;
      expect(error, text).toBeUndefined();
      const frames = parseSse(text);
      const data = frames.map((f) => f.data).filter((d) => d !== undefined);
      expect(data.slice(-2)).toEqual([STREAM_INTERNAL_ERROR, "[DONE]"]);
      expect(frames.filter((f) => f.event !== undefined)).toEqual([]);
      // Before the error: plain content chunks only, no finish reason and no usage chunk.
      const chunks = chunksOf(frames.slice(0, -2));
      expect(chunks.length).toBeGreaterThanOrEqual(3);
      expect(chunks.filter((c) => c.choices[0]?.finish_reason !== null || c.usage !== undefined)).toEqual([]);
      expect(SLOW_TEXT.startsWith(streamedText(chunks))).toBe(true);
    } finally {
      await restoreRedis();
    }

    // The settle failed, so nothing was charged and no usage record was written.
    expect((await balanceOf(app, accountId)).spent).toBe(0n);
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
    // The hold the failed settle could not drop is gone once its TTL has passed.
    const after = await eventually(async () => {
      const balance = await balanceOf(app, accountId);
      expect(balance.reserved).toBe(0n);
      return balance;
    }, TTL_MS + 3000);
    expect(after.spent).toBe(0n);
  });
});

describe("a process killed mid-call: its reservation expires (child process on a shared redis-server)", () => {
  let redis: RedisServer;
  let app: TestApp;
  let child: SluiceProcess | undefined;
  const TTL_MS = 1500;
  /** Small enough that the killed call's hold (its worst case is far above) takes the whole cap. */
  const CAP = 5000n;

  beforeAll(async () => {
    redis = await startRedisServer();
    app = await startTestApp({ REDIS_URL: redis.url }, { models: slowModels() });
  });

  afterAll(async () => {
    await child?.stop();
    await app?.close();
    await redis?.close();
  });

  it("the hold blocks the account until its TTL, then expires uncharged and the account can call again", async () => {
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: CAP, rps: 1000, burst: 1000 });
    child = await spawnSlowSluice({
      REDIS_URL: redis.url,
      PORT: "0",
      GRPC_PORT: "0",
      METRICS_PORT: "0",
      HOST: "127.0.0.1",
      SLUICE_LOG: "silent",
      SLUICE_ADMIN_TOKEN: ADMIN_TOKEN,
      SLUICE_RESERVATION_TTL_MS: String(TTL_MS),
    });
    const stream = await startStream(child.edgeUrl, apiKey);
    await stream.until((text) => contentDeltas(text).length >= 1, 10_000);

    await child.kill();
    const killedAt = performance.now();
    expect(child.child.signalCode).toBe("SIGKILL");

    // Right after the crash the hold is still there, and it takes the whole cap.
    const [held, refused] = await Promise.all([
      balanceOf(app, accountId),
      postChat(app, apiKey, { model: "service-extract", messages: CHAT_MESSAGES }),
    ]);
    const checkedMs = performance.now() - killedAt;
    expect(held, `checked ${checkedMs.toFixed(0)} ms after the kill`).toMatchObject({ spent: 0n, reserved: CAP });
    expectStructured(refused, 402, "spend_cap_exceeded", "billing_error");
    // The client saw the stream cut, not finished.
    const cut = await stream.end;
    expect(cut.error, cut.text).toBeDefined();
    expect(cut.text).not.toContain("[DONE]");

    // Nobody renews it now: it expires within its TTL (plus a margin for a loaded machine).
    const expired = await eventually(async () => {
      const balance = await balanceOf(app, accountId);
      expect(balance.reserved).toBe(0n);
      return balance;
    }, TTL_MS + 4000);
    expect(expired.spent).toBe(0n);
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);

    // The account is whole again: a new call is admitted, and billed as usual.
    const reply = await postChat(app, apiKey, { model: "service-extract", messages: CHAT_MESSAGES });
    expect(reply.status, reply.text).toBe(200);
    const usage = (reply.json as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    expect(await balanceOf(app, accountId)).toMatchObject({
      spent: BigInt(usage.prompt_tokens + 2 * usage.completion_tokens),
      reserved: 0n,
    });
    expect(await usageRecordsOf(app, accountId)).toHaveLength(1);
  });
});
