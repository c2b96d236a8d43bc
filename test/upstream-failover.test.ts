import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectDetail, expectRetryAfter, expectStructured } from "./support/envelopes.ts";
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from "./support/fake-upstream.ts";
import { postChat, type Reply } from "./support/http.ts";
import { readStream } from "./support/stream-reader.ts";
import {
  chatRequests,
  delay,
  expectBilledOnce,
  expectNoUpstreamLeak,
  expectUnbilled,
  startUpstreamApp,
  type UpstreamApp,
} from "./support/upstream-app.ts";

/**
 * README "Several baseUrls": least-outstanding spreading, failover before the first token
 * (connection refused, 5xx, 429), circuit breakers with a half-open probe, a structured 503
 * when no upstream can take the call, and upstream errors that become Sluice's own without
 * leaking anything of the upstream. No failed call is billed.
 */
const USER = "say something short";
const ANSWER = `Echo: ${USER}`;
const messages = [{ role: "user", content: USER }];
const usage = { prompt_tokens: 3 + 10, completion_tokens: 4 };

const started: FakeUpstream[] = [];
async function fake(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const u = await startFakeUpstream(options);
  started.push(u);
  return u;
}
/** An address that refuses connections: a fake that was started, then stopped. */
async function refusing(): Promise<FakeUpstream> {
  const u = await fake();
  await u.stop();
  return u;
}

afterAll(async () => {
  await Promise.all(started.map((u) => u.close()));
});

const contentOf = (reply: Reply) =>
  (reply.json as { choices?: Array<{ message?: { content?: string } }> } | undefined)?.choices?.[0]?.message?.content;

describe("several upstreams behind one model", () => {
  let app: UpstreamApp;
  let spread: FakeUpstream[];
  let refused: FakeUpstream, afterRefused: FakeUpstream;
  let failing500: FakeUpstream, after500: FakeUpstream;
  let failing429: FakeUpstream, after429: FakeUpstream;
  let bad: FakeUpstream, afterBad: FakeUpstream;
  let wrongKey: FakeUpstream;

  beforeAll(async () => {
    spread = [await fake({ chunkDelayMs: 150 }), await fake({ chunkDelayMs: 150 }), await fake({ chunkDelayMs: 150 })];
    [refused, afterRefused] = [await refusing(), await fake()];
    [failing500, after500] = [await fake({ mode: "status-500" }), await fake()];
    [failing429, after429] = [await fake({ mode: "status-429" }), await fake()];
    [bad, afterBad] = [await fake({ mode: "status-400" }), await fake()];
    wrongKey = await fake({ apiKey: "the-right-key" });
    const many = { breakerFailures: 1000 };
    app = await startUpstreamApp([
      { name: "spread", baseUrl: spread.map((u) => u.url), ...many },
      { name: "refused", baseUrl: [refused.url, afterRefused.url], ...many },
      { name: "five-hundred", baseUrl: [failing500.url, after500.url], ...many },
      { name: "four-twenty-nine", baseUrl: [failing429.url, after429.url], ...many },
      { name: "bad-request", baseUrl: [bad.url, afterBad.url], ...many },
      { name: "wrong-key", baseUrl: wrongKey.url, ...many },
    ]);
  });

  afterAll(async () => {
    await app?.close();
  });

  const account = () => app.newAccount({ rps: 1000, burst: 1000 });

  it("concurrent calls are spread by least outstanding requests", async () => {
    const { apiKey } = await account();
    const replies = await Promise.all(
      Array.from({ length: 6 }, () => postChat(app, apiKey, { model: "spread", messages, stream: true })),
    );
    for (const r of replies) expect(r.status).toBe(200);
    expect(spread.map((u) => chatRequests(u).length)).toEqual([2, 2, 2]);
  });

  it.each([false, true])("a refused connection fails over before the first byte (stream: %s)", async (stream) => {
    const { apiKey, accountId } = await account();
    const before = chatRequests(afterRefused).length;
    const reply = await postChat(app, apiKey, { model: "refused", messages, stream });
    expect(reply.status).toBe(200);
    expect(stream ? reply.text : contentOf(reply)).toContain(stream ? "Echo:" : ANSWER);
    expect(chatRequests(afterRefused).length).toBe(before + 1);
    expect(chatRequests(refused)).toHaveLength(0);
    await expectBilledOnce(app, accountId, "refused", usage);
  });

  it.each([
    ["five-hundred", 500],
    ["four-twenty-nine", 429],
  ] as const)("%s: an upstream %i fails over to the next upstream; the client sees 200", async (model, status) => {
    const { apiKey, accountId } = await account();
    const [failing, next] = status === 500 ? [failing500, after500] : [failing429, after429];
    const reply = await postChat(app, apiKey, { model, messages });
    expect(reply.status).toBe(200);
    expect(contentOf(reply)).toBe(ANSWER);
    expect(chatRequests(failing).map((r) => r.mode)).toEqual([`status-${status}`]);
    expect(chatRequests(next)).toHaveLength(1);
    expectNoUpstreamLeak(reply, [failing, next]);
    await expectBilledOnce(app, accountId, model, usage);
  });

  it.each([false, true])(
    "an upstream 400 is 400 upstream_bad_request, not failed over, not billed (stream: %s)",
    async (stream) => {
      const { apiKey, accountId } = await account();
      const before = chatRequests(bad).length;
      const reply = await postChat(app, apiKey, { model: "bad-request", messages, stream });
      expectDetail(reply, 400, "upstream_bad_request");
      expect(chatRequests(bad).length).toBe(before + 1);
      expect(chatRequests(afterBad)).toHaveLength(0);
      expectNoUpstreamLeak(reply, [bad, afterBad]);
      await expectUnbilled(app, accountId);
    },
  );

  it("an upstream 401 (a deployment mistake) is a structured 503 that names nothing of the upstream", async () => {
    const { apiKey, accountId } = await account();
    const reply = await postChat(app, apiKey, { model: "wrong-key", messages });
    expectStructured(reply, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(reply);
    expect(chatRequests(wrongKey)).toHaveLength(1);
    expectNoUpstreamLeak(reply, [wrongKey]);
    await expectUnbilled(app, accountId);
  });
});

describe("circuit breaker", () => {
  const OPEN_MS = 800;
  let app: UpstreamApp;
  let flaky: FakeUpstream, healthy: FakeUpstream, prober: FakeUpstream, backup: FakeUpstream;
  let sometimes: FakeUpstream, steady: FakeUpstream, lonely: FakeUpstream;

  beforeAll(async () => {
    [flaky, healthy] = [await fake({ mode: "status-500" }), await fake()];
    [prober, backup] = [await fake({ mode: "status-500" }), await fake()];
    // Fails its 1st and 4th chat requests only: never two failures in a row.
    [sometimes, steady] = [await fake({ behave: (n) => (n === 0 || n === 3 ? "status-500" : "ok") }), await fake()];
    lonely = await fake({ mode: "status-500" });
    app = await startUpstreamApp([
      { name: "lonely", baseUrl: lonely.url, breakerFailures: 1, breakerOpenMs: OPEN_MS },
      { name: "flaky", baseUrl: [flaky.url, healthy.url], breakerFailures: 2, breakerOpenMs: OPEN_MS },
      { name: "probe-abort", baseUrl: [prober.url, backup.url], breakerFailures: 1, breakerOpenMs: OPEN_MS },
      { name: "sometimes", baseUrl: [sometimes.url, steady.url], breakerFailures: 2, breakerOpenMs: 60_000 },
    ]);
  });

  afterAll(async () => {
    await app?.close();
  });

  it("opens after breakerFailures failures, lets one probe in after breakerOpenMs, closes on its success", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const call = async () => {
      const reply = await postChat(app, apiKey, { model: "flaky", messages });
      expect(reply.status).toBe(200);
      expect(contentOf(reply)).toBe(ANSWER);
    };
    await call();
    await call();
    expect(chatRequests(flaky)).toHaveLength(2); // two failures: the breaker is open now
    for (let i = 0; i < 3; i++) await call();
    expect(chatRequests(flaky)).toHaveLength(2); // set aside while open
    expect(chatRequests(healthy)).toHaveLength(5);

    await delay(OPEN_MS + 100);
    await call(); // half-open: one probe, which fails and opens the breaker again
    expect(chatRequests(flaky)).toHaveLength(3);
    await call();
    expect(chatRequests(flaky)).toHaveLength(3);

    flaky.mode = "ok";
    await delay(OPEN_MS + 100);
    await call(); // the probe succeeds: closed again
    expect(chatRequests(flaky)).toHaveLength(4);
    await call();
    await call();
    expect(chatRequests(flaky)).toHaveLength(6); // back in rotation (first in order at equal load)
    expect(chatRequests(healthy)).toHaveLength(7);
    expect(
      (await app.admin.listUsageRecords({ accountId, pageSize: 100 }, { headers: app.adminHeaders })).usageRecords,
    ).toHaveLength(10);
  });

  it("a single upstream that recovers serves every call again after its successful probe", async () => {
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    expect((await postChat(app, apiKey, { model: "lonely", messages })).status).toBe(503); // one failure: open
    expect((await postChat(app, apiKey, { model: "lonely", messages })).status).toBe(503); // set aside: not tried
    expect(chatRequests(lonely)).toHaveLength(1);
    lonely.mode = "ok";
    await delay(OPEN_MS + 100);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await postChat(app, apiKey, { model: "lonely", messages })).status);
    expect(statuses).toEqual([200, 200, 200, 200]);
    expect(chatRequests(lonely)).toHaveLength(5);
  });

  it("failures that are not in a row do not open the breaker: a success resets the count", async () => {
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    for (let i = 0; i < 5; i++) {
      const reply = await postChat(app, apiKey, { model: "sometimes", messages, stream: i % 2 === 0 });
      expect(reply.status).toBe(200);
    }
    // fail, ok, ok, fail, ok: the 5th call must still be offered to the first upstream.
    expect(chatRequests(sometimes).map((r) => r.mode)).toEqual(["status-500", "ok", "ok", "status-500", "ok"]);
    expect(chatRequests(steady)).toHaveLength(2);
  });

  it("a half-open probe cancelled by its client does not set the upstream aside for good", async () => {
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    expect((await postChat(app, apiKey, { model: "probe-abort", messages })).status).toBe(200);
    expect(chatRequests(prober)).toHaveLength(1); // one failure: open
    prober.mode = "ok";
    prober.chunkDelayMs = 300;
    await delay(OPEN_MS + 100);

    // The probe: a slow stream whose client goes away after the first token.
    const abort = new AbortController();
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      signal: abort.signal,
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: "probe-abort", messages, stream: true }),
    });
    if (!res.body) throw new Error("no body");
    const reader = readStream(res.body);
    await reader.until((t) => t.includes("Echo:"), 5000);
    abort.abort();
    await prober.waitForAbort(1);
    prober.chunkDelayMs = 0;

    // Whatever the breaker makes of a cancelled probe, the upstream must get calls again.
    const deadline = Date.now() + 4 * OPEN_MS;
    while (chatRequests(prober).length < 3 && Date.now() < deadline) {
      expect((await postChat(app, apiKey, { model: "probe-abort", messages })).status).toBe(200);
      await delay(100);
    }
    expect(chatRequests(prober).length).toBeGreaterThanOrEqual(3);
  });
});

describe("when no upstream can take the call", () => {
  let app: UpstreamApp;
  let down: FakeUpstream, erroring: FakeUpstream;

  beforeAll(async () => {
    [down, erroring] = [await refusing(), await fake({ mode: "status-500" })];
    app = await startUpstreamApp([
      { name: "all-down", baseUrl: [down.url, erroring.url], breakerFailures: 2, breakerOpenMs: 60_000 },
    ]);
  });

  afterAll(async () => {
    await app?.close();
  });

  it("answers a structured 503 with Retry-After, unbilled; /readyz turns 503 once every breaker is open", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const upstreams = [down, erroring];
    const first = await postChat(app, apiKey, { model: "all-down", messages });
    expectStructured(first, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(first);
    expectNoUpstreamLeak(first, upstreams);
    expect(chatRequests(erroring)).toHaveLength(1);
    expect((await fetch(`${app.edgeUrl}/readyz`)).status).toBe(200); // one failure each: still closed

    const second = await postChat(app, apiKey, { model: "all-down", messages, stream: true });
    expectStructured(second, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(second);
    expectNoUpstreamLeak(second, upstreams);
    expect(chatRequests(erroring)).toHaveLength(2);

    const ready = await fetch(`${app.edgeUrl}/readyz`);
    const readyText = await ready.text();
    expect(ready.status).toBe(503);
    expectNoUpstreamLeak({ text: readyText, headers: ready.headers }, upstreams);

    const third = await postChat(app, apiKey, { model: "all-down", messages });
    expectStructured(third, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(third);
    expectNoUpstreamLeak(third, upstreams);
    expect(chatRequests(erroring)).toHaveLength(2); // both breakers open: nothing was tried
    await expectUnbilled(app, accountId);

    // The built-in model is unaffected.
    expect((await postChat(app, apiKey, { model: "service-extract", messages })).status).toBe(200);
  });
});
