import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatedEngine, registryWith } from "./support/engines.ts";
import { eventually, expectRetryAfter, expectStructured } from "./support/envelopes.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { postChat, type Reply } from "./support/http.ts";
import { openRaw, rawGet, statusOf, wholeResponse, type RawConnection } from "./support/raw-socket.ts";
import { GUARD_MS, within } from "./support/within.ts";

/**
 * Issue 7, defect 6: no limits on connections or time. Half-sent requests and idle connections
 * held file descriptors for as long as their clients liked, and a process took any number of
 * calls at once. Every test runs with small limits and waits on the event it expects (a close,
 * a reset, a refusal) under a guard of a few seconds; node's defaults (a 60 s header timeout, a
 * 300 s request timeout, no connection cap, no HTTP/2 stream or idle limit) fail them all.
 * The core's h2c limits are in core-h2c-limits.test.ts.
 */

const chatBody = (model: string, stream: boolean) => ({
  model,
  stream,
  messages: [{ role: "user", content: "Where do rivers carry water?" }],
});

describe("edge timeouts (issue 7, defect 6)", () => {
  let app: TestApp;
  let apiKey: string;
  beforeAll(async () => {
    app = await startTestApp({
      SLUICE_HEADERS_TIMEOUT_MS: "300",
      SLUICE_REQUEST_TIMEOUT_MS: "600",
      SLUICE_KEEPALIVE_TIMEOUT_MS: "300",
    });
    ({ apiKey } = await app.newAccount({ rps: 1000, burst: 1000 }));
  });
  afterAll(async () => {
    await app?.close();
  });

  it("closes 20 connections that never finish their headers, with a 408, while /healthz answers", async () => {
    const sockets: RawConnection[] = await Promise.all(Array.from({ length: 20 }, () => openRaw(app.edgeUrl)));
    for (const [i, s] of sockets.entries()) {
      s.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nX-Partial-${i}: half`);
    }
    expect(await rawGet(app.edgeUrl, "/healthz")).toBe(200);
    const texts = await Promise.all(
      sockets.map((s, i) => s.closed(GUARD_MS, `half-sent headers on connection ${i} were never timed out`)),
    );
    for (const text of texts) expect(text === "" || statusOf(text) === 408, JSON.stringify(text)).toBe(true);
    expect(await rawGet(app.edgeUrl, "/healthz")).toBe(200);
  });

  it("answers 408 and closes a request whose announced body never comes", async () => {
    const conn = await openRaw(app.edgeUrl);
    conn.socket.write(
      [
        "POST /v1/chat/completions HTTP/1.1",
        "Host: edge",
        `Authorization: Bearer ${apiKey}`,
        "Content-Type: application/json",
        "Content-Length: 1000",
        "",
        "",
      ].join("\r\n"),
    );
    const text = await conn.closed(GUARD_MS, "a request with a missing body was never timed out");
    expect(statusOf(text)).toBe(408);
  });

  it("closes a keep-alive connection left idle after its answer", async () => {
    const conn = await openRaw(app.edgeUrl);
    conn.socket.write("GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n");
    const answer = await conn.receivedUntil(wholeResponse, GUARD_MS, "keep-alive /healthz");
    expect(statusOf(answer)).toBe(200);
    // Node's default keeps it 5 s; the guard is shorter.
    expect(await conn.closed(3000, "an idle keep-alive connection was never closed")).toBe(answer);
  });
});

describe("edge connection cap (issue 7, defect 6)", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ SLUICE_MAX_CONNECTIONS: "20", SLUICE_KEEPALIVE_TIMEOUT_MS: "30000" });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("closes a 21st connection without an answer while 20 are open, and serves again once some close", async () => {
    // Each of the 20 gets a whole keep-alive answer first: the server has taken and counted it.
    const held: RawConnection[] = [];
    for (let i = 0; i < 20; i++) {
      const conn = await openRaw(app.edgeUrl);
      conn.socket.write("GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n");
      const text = await conn.receivedUntil(wholeResponse, GUARD_MS, `keep-alive /healthz on connection ${i}`);
      expect(statusOf(text)).toBe(200);
      held.push(conn);
    }
    try {
      const extra = await openRaw(app.edgeUrl);
      extra.socket.write("GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n");
      expect(await extra.closed(GUARD_MS, "the 21st connection was neither answered nor closed")).toBe("");
      expect(held.some((c) => c.isClosed())).toBe(false);

      for (const conn of held.splice(0, 5)) conn.socket.destroy();
      await eventually(async () => expect(await rawGet(app.edgeUrl, "/healthz")).toBe(200), GUARD_MS);
    } finally {
      for (const conn of held) conn.socket.destroy();
    }
  });
});

describe("calls in flight per process (issue 7, defect 6)", () => {
  const engine = gatedEngine();
  let app: TestApp;
  let apiKey: string;
  beforeAll(async () => {
    app = await startTestApp(
      { SLUICE_MAX_CALLS_IN_FLIGHT: "2" },
      { models: registryWith([{ name: "gated", engine }]) },
    );
    ({ apiKey } = await app.newAccount({ rps: 1000, burst: 1000 }));
  });
  afterAll(async () => {
    engine.open();
    await app?.close();
  });

  it("refuses a third call with 503 and Retry-After while two are in flight; serves again once they end", async () => {
    const first: Array<Promise<Reply>> = [
      postChat(app, apiKey, chatBody("gated", true)),
      postChat(app, apiKey, chatBody("gated", true)),
    ];
    // Awaited below; a run that fails earlier must not leave them unhandled.
    for (const call of first) call.catch(() => undefined);
    await within(engine.startedCalls(2), GUARD_MS, "two gated calls never reached their engine");

    const third = await within(
      postChat(app, apiKey, chatBody("gated", true)),
      GUARD_MS,
      "a third call was queued instead of refused",
    );
    expectStructured(third, 503, "service_unavailable", "service_unavailable");
    expectRetryAfter(third);

    engine.open();
    for (const reply of await within(Promise.all(first), GUARD_MS, "the gated calls never finished")) {
      expect(reply.status).toBe(200);
      expect(reply.text).toContain("Rivers");
      expect(reply.text).toContain("data: [DONE]");
    }
    const after = await within(
      postChat(app, apiKey, chatBody("gated", false)),
      GUARD_MS,
      "a call after the first two was not served",
    );
    expect(after.status).toBe(200);
  });
});
