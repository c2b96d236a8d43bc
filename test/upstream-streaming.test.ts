import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRetryAfter, expectStructured } from "./support/envelopes.ts";
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from "./support/fake-upstream.ts";
import { postChat, type Reply } from "./support/http.ts";
import { dataJson, parseSse, type SseFrame } from "./support/sse.ts";
import { readStream } from "./support/stream-reader.ts";
import {
  chatRequests,
  expectBilledOnce,
  expectNoUpstreamLeak,
  expectUnbilled,
  lastChatBody,
  startUpstreamApp,
  type UpstreamApp,
} from "./support/upstream-app.ts";

/**
 * README "Streaming" for upstream models: first-byte and idle timeouts, a stream that dies
 * after its first token (the internal-error event, unbilled), keep-alive comments while the
 * upstream is slow, client disconnects that abort the upstream request, and non-streaming
 * callers served from the upstream stream.
 */
const USER = "say something short";
const ANSWER = `Echo: ${USER}`;
const messages = [{ role: "user", content: USER }];
const usage = { prompt_tokens: 3 + 10, completion_tokens: 4 };
const TIMEOUT_MS = 300;
const INTERNAL_ERROR = { error: "service_unavailable", status: 500 };

const started: FakeUpstream[] = [];
async function fake(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const u = await startFakeUpstream(options);
  started.push(u);
  return u;
}

afterAll(async () => {
  await Promise.all(started.map((u) => u.close()));
});

/** The data frames of a complete SSE reply, `[DONE]` as the string. */
function dataFrames(reply: Reply): SseFrame[] {
  expect(reply.headers.get("content-type") ?? "").toMatch(/^text\/event-stream/);
  return parseSse(reply.text).filter((f) => !f.comment);
}

/** Asserts SPEC's internal-error ending: content first, then the error event and `[DONE]`, no usage. */
function expectInternalErrorEnding(reply: Reply): void {
  expect(reply.status).toBe(200);
  const frames = dataFrames(reply);
  expect(frames.slice(-2).map((f) => f.data)).toEqual([JSON.stringify(INTERNAL_ERROR), "[DONE]"]);
  const json = dataJson(frames);
  expect(json.at(-1)).toEqual(INTERNAL_ERROR);
  const chunks = json.slice(0, -1) as Array<{ choices: Array<{ delta: { content?: string } }>; usage?: unknown }>;
  expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toMatch(/^Echo:/);
  expect(chunks.some((c) => c.usage !== undefined)).toBe(false);
}

describe("upstream timeouts and failures", () => {
  let app: UpstreamApp;
  let stall: FakeUpstream, stallFirst: FakeUpstream, afterStall: FakeUpstream;
  let midStall: FakeUpstream, afterMid: FakeUpstream, dying: FakeUpstream, afterDying: FakeUpstream;

  beforeAll(async () => {
    stall = await fake({ mode: "stall-before-headers" });
    [stallFirst, afterStall] = [await fake({ mode: "stall-before-headers" }), await fake()];
    [midStall, afterMid] = [await fake({ mode: "stall-mid-stream" }), await fake()];
    [dying, afterDying] = [await fake({ mode: "die-mid-stream" }), await fake()];
    app = await startUpstreamApp([
      { name: "first-byte", baseUrl: stall.url, firstByteTimeoutMs: TIMEOUT_MS },
      { name: "first-byte-failover", baseUrl: [stallFirst.url, afterStall.url], firstByteTimeoutMs: TIMEOUT_MS },
      { name: "idle", baseUrl: [midStall.url, afterMid.url], idleTimeoutMs: TIMEOUT_MS },
      { name: "die", baseUrl: [dying.url, afterDying.url] },
    ]);
  });

  afterAll(async () => {
    await app?.close();
  });

  const account = () => app.newAccount({ rps: 1000, burst: 1000 });

  it.each([true, false])(
    "no first byte within firstByteTimeoutMs from the only upstream: 503, unbilled (stream: %s)",
    async (stream) => {
      const { apiKey, accountId } = await account();
      const index = stall.requests.length;
      const t0 = Date.now();
      const reply = await postChat(app, apiKey, { model: "first-byte", messages, stream });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(Date.now() - t0).toBeLessThan(5000);
      expectStructured(reply, 503, "service_unavailable", "service_unavailable");
      expectRetryAfter(reply);
      expectNoUpstreamLeak(reply, [stall]);
      await stall.waitForAbort(index); // the stalled upstream request was given up, not leaked
      await expectUnbilled(app, accountId);
    },
  );

  it("no first byte within firstByteTimeoutMs fails over to a healthy upstream", async () => {
    const { apiKey, accountId } = await account();
    const reply = await postChat(app, apiKey, { model: "first-byte-failover", messages, stream: true });
    expect(reply.status).toBe(200);
    const json = dataJson(dataFrames(reply)) as Array<{
      choices: Array<{ delta: { content?: string } }>;
      usage?: typeof usage;
    }>;
    expect(json.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(ANSWER);
    expect(json.at(-1)?.usage).toMatchObject(usage);
    await stallFirst.waitForAbort(0);
    expect(chatRequests(afterStall)).toHaveLength(1);
    await expectBilledOnce(app, accountId, "first-byte-failover", usage);
  });

  it("a stall after the first token past idleTimeoutMs ends the stream: internal-error event, unbilled", async () => {
    const { apiKey, accountId } = await account();
    const t0 = Date.now();
    const reply = await postChat(app, apiKey, { model: "idle", messages, stream: true });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expectInternalErrorEnding(reply);
    expectNoUpstreamLeak(reply, [midStall, afterMid]);
    await midStall.waitForAbort(0);
    expect(chatRequests(afterMid)).toHaveLength(0); // no failover once a token was delivered
    await expectUnbilled(app, accountId);
  });

  it("an upstream that dies mid-stream ends the stream with the internal-error event, unbilled", async () => {
    const { apiKey, accountId } = await account();
    const reply = await postChat(app, apiKey, { model: "die", messages, stream: true });
    expectInternalErrorEnding(reply);
    expectNoUpstreamLeak(reply, [dying, afterDying]);
    expect(chatRequests(afterDying)).toHaveLength(0);
    await expectUnbilled(app, accountId);
  });

  it("a non-streaming call whose upstream dies mid-answer: 503 + Retry-After, not 500; unbilled, no leak", async () => {
    const { apiKey, accountId } = await account();
    const reply = await postChat(app, apiKey, { model: "die", messages });
    expectStructured(reply, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(reply);
    expectNoUpstreamLeak(reply, [dying, afterDying]);
    await expectUnbilled(app, accountId);
  });
});

describe("slow upstreams and clients that leave", () => {
  let app: UpstreamApp;
  let keepAliveApp: UpstreamApp;
  let slow: FakeUpstream, plain: FakeUpstream, crawling: FakeUpstream;

  beforeAll(async () => {
    slow = await fake({ chunkDelayMs: 150 });
    plain = await fake();
    crawling = await fake({ chunkDelayMs: 300 });
    app = await startUpstreamApp([
      { name: "slow", baseUrl: slow.url },
      { name: "plain", baseUrl: plain.url },
    ]);
    keepAliveApp = await startUpstreamApp([{ name: "crawling", baseUrl: crawling.url }], {
      env: { SLUICE_SSE_KEEPALIVE_MS: "60" },
    });
  });

  afterAll(async () => {
    await app?.close();
    await keepAliveApp?.close();
  });

  const longMessages = [{ role: "user", content: Array.from({ length: 30 }, (_, i) => `word${i}`).join(" ") }];

  it("sends `: keep-alive` comments while the upstream is slow, and still completes the stream", async () => {
    const { apiKey, accountId } = await keepAliveApp.newAccount({ rps: 1000, burst: 1000 });
    const reply = await postChat(keepAliveApp, apiKey, { model: "crawling", messages, stream: true });
    expect(reply.status).toBe(200);
    const frames = parseSse(reply.text);
    const firstContent = frames.findIndex((f) => f.data?.includes("Echo:") === true);
    const done = frames.findIndex((f) => f.data === "[DONE]");
    expect(firstContent).toBeGreaterThanOrEqual(0);
    expect(done).toBe(frames.length - 1);
    const between = frames.slice(firstContent + 1, done).filter((f) => f.comment);
    expect(between.length).toBeGreaterThan(0);
    for (const f of between) expect(f.raw).toBe(": keep-alive");
    const json = dataJson(frames.filter((f) => !f.comment)) as Array<{
      choices: Array<{ delta: { content?: string } }>;
      usage?: typeof usage;
    }>;
    expect(json.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(ANSWER);
    expect(json.at(-1)?.usage).toMatchObject(usage);
    await expectBilledOnce(keepAliveApp, accountId, "crawling", usage);
  });

  it("a streaming client that disconnects mid-stream aborts the upstream request; nothing is billed", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const index = slow.requests.length;
    const abort = new AbortController();
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      signal: abort.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: "slow", messages: longMessages, stream: true }),
    });
    expect(res.status).toBe(200);
    if (!res.body) throw new Error("no body");
    const reader = readStream(res.body);
    await reader.until((t) => t.includes("word1"), 5000);
    abort.abort();
    await reader.end;
    await slow.waitForAbort(index);
    expect(slow.requests[index]?.finished).toBe(false);
    await expectUnbilled(app, accountId);
  });

  it("a non-streaming client that disconnects aborts the upstream request; nothing is billed", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const index = slow.requests.length;
    const abort = new AbortController();
    const pending = fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      signal: abort.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: "slow", messages: longMessages }),
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    await slow.waitForRequest(index);
    await new Promise((r) => setTimeout(r, 200));
    abort.abort();
    expect(await pending).toBeInstanceOf(Error);
    await slow.waitForAbort(index);
    await expectUnbilled(app, accountId);
  });

  it("a non-streaming call is served from the upstream stream: whole answer, upstream usage, billed once", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const reply = await postChat(app, apiKey, { model: "plain", messages });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      object: "chat.completion",
      model: "plain",
      choices: [{ index: 0, message: { role: "assistant", content: ANSWER }, finish_reason: "stop" }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    });
    expect(lastChatBody(plain)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    await expectBilledOnce(app, accountId, "plain", usage);
  });

  it("a non-streaming call cut by max_tokens upstream: finish_reason length, billed from upstream usage", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const reply = await postChat(app, apiKey, { model: "plain", messages, max_tokens: 2 });
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({
      choices: [{ message: { content: "Echo: say" }, finish_reason: "length" }],
      usage: { prompt_tokens: usage.prompt_tokens, completion_tokens: 2 },
    });
    expect(lastChatBody(plain).max_tokens).toBe(2);
    await expectBilledOnce(app, accountId, "plain", { prompt_tokens: usage.prompt_tokens, completion_tokens: 2 });
  });
});
