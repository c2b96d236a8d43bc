import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.ts";
import { CompletionService } from "../gen/sluice/completion/v1/completion_service_pb.ts";
import { CATALOGUE, retryAfterMsOf } from "../src/errors/catalogue.ts";
import { gatedEngine, registryWith } from "./support/engines.ts";
import { expectRetryHeaders, expectStructured, secondsToNextUtcMonth } from "./support/envelopes.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { balanceOf } from "./support/ledger.ts";
import { CHAT_MESSAGES, postChat, type Reply } from "./support/http.ts";
import { GUARD_MS, within } from "./support/within.ts";

/**
 * Honest retry signals over HTTP (issue 11, item 5). A `spend_cap_exceeded` that only a call in
 * flight causes is temporary: a Retry-After of at most the reservation TTL (and, over gRPC,
 * `ErrorInfo.metadata.temporary` "true"); one the month's spend causes keeps the time to the
 * next month. Every delay also travels as `retry-after-ms`, which the OpenAI SDKs read. A gated
 * call holds the budget open, so nothing here depends on timing.
 */

const TTL_MS = 10_000;
const chat = { model: "service-extract", messages: CHAT_MESSAGES, max_tokens: 5 };
const messageOf = (reply: Reply) => (reply.json as { error: { message: string } }).error.message;

describe("spend_cap_exceeded: temporary or until the next month", () => {
  let app: TestApp;
  const gated = gatedEngine();

  beforeAll(async () => {
    app = await startTestApp(
      { SLUICE_RESERVATION_TTL_MS: String(TTL_MS) },
      { models: registryWith([{ name: "gated", engine: gated }]) },
    );
  });

  afterAll(async () => {
    gated.open();
    await app?.close();
  });

  it("a call another call's hold keeps out gets a short Retry-After; a spent month the time to the next", async () => {
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: 1_000n, rps: 1000, burst: 1000 });
    // Without max_tokens the gated call's worst case is far above the cap: it holds all of it.
    const holding = postChat(app, apiKey, { model: "gated", messages: CHAT_MESSAGES });
    holding.catch(() => undefined);
    await within(gated.startedCalls(1), GUARD_MS, "the gated call never reached its engine");
    expect((await balanceOf(app, accountId)).reserved).toBe(1_000n);

    for (const stream of [false, true]) {
      const held = await postChat(app, apiKey, { ...chat, stream });
      expectStructured(held, 402, "spend_cap_exceeded", "billing_error");
      const { seconds, ms } = expectRetryHeaders(held);
      expect(ms).toBeGreaterThanOrEqual(1_000);
      expect(ms).toBeLessThanOrEqual(TTL_MS);
      expect(seconds).toBeLessThanOrEqual(TTL_MS / 1000);
      expect(messageOf(held)).not.toBe(CATALOGUE.spend_cap_exceeded.message);
    }

    // A gRPC caller is told in ErrorInfo, with the same delay in RetryInfo.
    if (!app.coreUrl) throw new Error("no core");
    const completion = createClient(CompletionService, createGrpcTransport({ baseUrl: app.coreUrl }));
    const refused = await completion
      .createChatCompletion(
        { params: { messages: CHAT_MESSAGES, maxTokens: 5n } },
        { headers: { authorization: `Bearer ${apiKey}` } },
      )
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(refused?.findDetails(ErrorInfoSchema)[0]).toMatchObject({
      reason: "spend_cap_exceeded",
      metadata: { temporary: "true" },
    });
    expect(retryAfterMsOf(refused)).toBeLessThanOrEqual(TTL_MS);

    const spent = await app.newAccount({ capUsdMicros: 1n, rps: 1000, burst: 1000 });
    const used = await postChat(app, spent.apiKey, chat);
    expectStructured(used, 402, "spend_cap_exceeded", "billing_error");
    const untilNextMonth = expectRetryHeaders(used);
    expect(Math.abs(untilNextMonth.seconds - secondsToNextUtcMonth())).toBeLessThanOrEqual(5);
    expect(messageOf(used)).toBe(CATALOGUE.spend_cap_exceeded.message);

    // Once the call in flight ends, its hold is settled and the refused call fits.
    gated.open();
    expect((await within(holding, GUARD_MS, "the gated call never finished")).status).toBe(200);
    expect((await postChat(app, apiKey, chat)).status).toBe(200);
  });
});

describe("429 carries retry-after-ms", () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp();
  });

  afterAll(async () => {
    await app?.close();
  });

  it("a real 429 from the edge has Retry-After and retry-after-ms, consistent", async () => {
    const { apiKey } = await app.newAccount({ rps: 1, burst: 1 });
    expect((await postChat(app, apiKey, chat)).status).toBe(200);
    const limited = await postChat(app, apiKey, chat);
    expectStructured(limited, 429, "api_key_rate_limited", "rate_limit_error");
    const { seconds, ms } = expectRetryHeaders(limited);
    expect(seconds).toBe(1);
    expect(ms).toBeGreaterThan(0);
    expect(ms).toBeLessThanOrEqual(1_000);
  });

  it("the OpenAI SDK retries a 429 after retry-after-ms, not the whole second of Retry-After", async () => {
    // 4 requests a second: the second waits about 250 ms, which Retry-After would round up to 1 s.
    const { apiKey } = await app.newAccount({ rps: 4, burst: 1 });
    const statuses: number[] = [];
    const sdk = new OpenAI({
      apiKey,
      baseURL: `${app.edgeUrl}/v1`,
      maxRetries: 1,
      timeout: 10_000,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        statuses.push(res.status);
        return res;
      },
    });
    await sdk.get("/me");
    const started = Date.now();
    expect(await sdk.get("/me")).toMatchObject({ email: null });
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(statuses).toEqual([200, 429, 200]);
  });
});
