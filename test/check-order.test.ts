import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PaymentStatus, SubscriptionStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { generateApiKey } from "../src/services/auth/api-key.ts";
import { expectDetail, expectStructured } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { sleep } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, chunkedUpload, postChat, rawRequest, tryJson, type Reply } from "./support/http.ts";

/**
 * DESIGN's check order for a chat call: each pair sends a request that fails two checks and
 * asserts the earlier one wins. The oversized-Content-Length pairs use node:http, since
 * fetch cannot declare a length it does not send.
 */
let app: TestApp;
const chat = { model: "service-extract", messages: CHAT_MESSAGES };
const HUGE = 64 * 1024 * 1024;
const tooManyTokens = "word ".repeat(40_000);
const touched: string[] = [];

async function account(options: Parameters<TestApp["newAccount"]>[0] = {}) {
  const a = await app.newAccount({ rps: 1000, burst: 1000, ...options });
  touched.push(a.accountId);
  return a;
}

/** Declares a Content-Length of 64 MiB and sends nothing; the answer must come anyway. */
async function declaredHuge(authorization: string | undefined): Promise<Reply & { bytesSent: number }> {
  const raw = await rawRequest(app.edgeUrl, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: {
      "content-type": "application/json",
      "content-length": HUGE,
      ...(authorization !== undefined && { authorization }),
    },
    pump: async (_write, stopped) => {
      for (let waited = 0; !stopped() && waited < 5000; waited += 10) await sleep(10);
    },
    timeoutMs: 5000,
  });
  if (raw.status === undefined) throw raw.error ?? new Error("no response");
  const headers = new Headers();
  for (const [k, v] of Object.entries(raw.headers)) if (typeof v === "string") headers.set(k, v);
  return { status: raw.status, headers, text: raw.text, json: tryJson(raw.text), bytesSent: raw.bytesSent };
}

beforeAll(async () => {
  app = await startTestApp();
});

afterAll(async () => {
  await app?.close();
});

describe("DESIGN check order", () => {
  it("1 before 2: missing bearer beats an oversized Content-Length", async () => {
    const reply = await declaredHuge(undefined);
    expectDetail(reply, 401, "missing_bearer_token");
    expect(reply.bytesSent).toBe(0);
  });

  it("2 before 3: oversized Content-Length beats an invalid key, before any body byte is sent", async () => {
    const reply = await declaredHuge(`Bearer ${generateApiKey()}`);
    expect(reply.status).toBe(413);
    expect(reply.bytesSent).toBe(0);
    const body = tryJson(reply.text);
    expect(typeof body === "object" && body !== null && ("error" in body || "detail" in body)).toBe(false);
  });

  it("3 before 5: invalid key beats an unparsable body", async () => {
    expectDetail(await postChat(app, generateApiKey(), "{not json"), 401, "invalid_api_key");
    expectDetail(await postChat(app, "svc_sk_short", "[1,2]"), 401, "invalid_api_key");
  });

  it("3 before 4: an invalid key is refused as such, not rate-limited", async () => {
    const key = generateApiKey();
    for (let i = 0; i < 15; i++) expectDetail(await postChat(app, key, chat), 401, "invalid_api_key");
  });

  it("4 before 5: the rate limit beats an unparsable body", async () => {
    const { apiKey } = await account({ rps: 1, burst: 1 });
    const me = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(me.status).toBe(200);
    expectStructured(await postChat(app, apiKey, "{not json"), 429, "api_key_rate_limited", "rate_limit_error");
  });

  it("5 before 6: an unparsable body or a non-object beats onboarding", async () => {
    const { apiKey } = await account({ onboarded: false });
    expectDetail(await postChat(app, apiKey, "{"), 400, "invalid_json_body");
    expectDetail(await postChat(app, apiKey, "[]"), 400, "body_must_be_object");
  });

  it("6 before 7: account status beats an unknown model", async () => {
    const onboarding = await account({ onboarded: false });
    expectStructured(
      await postChat(app, onboarding.apiKey, { ...chat, model: "nope" }),
      402,
      "onboarding_incomplete",
      "billing_error",
    );
    const failed = await account();
    await app.admin.updateAccount(
      { accountId: failed.accountId, paymentStatus: PaymentStatus.FAILED },
      { headers: app.adminHeaders },
    );
    expectStructured(
      await postChat(app, failed.apiKey, { ...chat, model: "nope" }),
      402,
      "payment_failed",
      "billing_error",
    );
    const canceled = await account();
    await app.admin.updateAccount(
      { accountId: canceled.accountId, subscriptionStatus: SubscriptionStatus.CANCELED },
      { headers: app.adminHeaders },
    );
    expectStructured(
      await postChat(app, canceled.apiKey, { ...chat, model: "nope" }),
      402,
      "subscription_canceled",
      "billing_error",
    );
  });

  it("6 before 9: account status beats the spend cap", async () => {
    const { apiKey, accountId } = await account({ capUsdMicros: 1n });
    await app.admin.updateAccount({ accountId, paymentStatus: PaymentStatus.FAILED }, { headers: app.adminHeaders });
    expectStructured(await postChat(app, apiKey, chat), 402, "payment_failed", "billing_error");
  });

  it("7 before 8: an unknown model beats input_too_large", async () => {
    const { apiKey } = await account();
    expectDetail(
      await postChat(app, apiKey, { model: "nope", messages: [{ role: "user", content: tooManyTokens }] }),
      404,
      "model_not_found",
    );
  });

  it("8 before 9: input_too_large beats the spend cap", async () => {
    const { apiKey } = await account({ capUsdMicros: 1n });
    expectStructured(
      await postChat(app, apiKey, { messages: [{ role: "user", content: tooManyTokens }] }),
      413,
      "input_too_large",
      "invalid_request_error",
    );
  });

  it("refused calls charge nothing and write no usage record", async () => {
    for (const id of touched) {
      const balance = await balanceOf(app, id);
      expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
      expect(await usageRecordsOf(app, id)).toHaveLength(0);
    }
  });
});

describe("the 32 MiB body limit", () => {
  it("a declared Content-Length just above 32 MiB is refused with a plain 413 for a valid key", async () => {
    const { apiKey } = await account();
    const raw = await rawRequest(app.edgeUrl, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: {
        "content-type": "application/json",
        "content-length": 32 * 1024 * 1024 + 1,
        authorization: `Bearer ${apiKey}`,
      },
      pump: async (_write, stopped) => {
        for (let waited = 0; !stopped() && waited < 5000; waited += 10) await sleep(10);
      },
      timeoutMs: 5000,
    });
    expect(raw.status).toBe(413);
    expect(raw.bytesSent).toBe(0);
    expect(raw.headers["content-type"] ?? "").not.toMatch(/json/);
  });

  it("a chunked body that grows past 32 MiB is refused with a plain 413, and the server lives on", async () => {
    const { apiKey, accountId } = await account();
    const raw = await chunkedUpload(app.edgeUrl, {
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      prefix: '{"messages":[{"role":"user","content":"',
      chunkBytes: 1024 * 1024,
      chunks: 48,
    });
    expect({ status: raw.status, error: raw.status === undefined ? raw.error?.message : undefined }).toEqual({
      status: 413,
      error: undefined,
    });
    expect(raw.bytesSent).toBeGreaterThan(32 * 1024 * 1024);
    expect(raw.text).not.toMatch(/"code"|"detail"/);
    const health = await fetch(`${app.edgeUrl}/healthz`);
    expect(health.status).toBe(200);
    expect((await postChat(app, apiKey, chat)).status).toBe(200);
    expect((await balanceOf(app, accountId)).reserved).toBe(0n);
  });

  it("a 16 MiB body is read, then refused for its token count, not its size", async () => {
    const { apiKey } = await account();
    const content = "a ".repeat(8 * 1024 * 1024);
    const reply = await postChat(app, apiKey, { messages: [{ role: "user", content }] });
    expectStructured(reply, 413, "input_too_large", "invalid_request_error");
  });
});
