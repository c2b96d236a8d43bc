import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PaymentStatus, SubscriptionStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { generateApiKey } from "../src/services/auth/api-key.ts";
import {
  eventually,
  expectDetail,
  expectKeyedHeaders,
  expectRetryAfter,
  expectStructured,
  secondsToNextUtcMonth,
} from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat } from "./support/http.ts";

/**
 * Every row of SPEC's error catalogue over raw HTTP: status, exact envelope, Retry-After,
 * and the keyed-response headers. 503 and the 32 MiB limit have their own files.
 */
let app: TestApp;
const chat = { model: "service-extract", messages: CHAT_MESSAGES };
/** Accounts whose every call was refused: their spend must stay zero. */
const refusedAccounts: string[] = [];

async function account(options: Parameters<TestApp["newAccount"]>[0] = {}) {
  const a = await app.newAccount({ rps: 1000, burst: 1000, ...options });
  refusedAccounts.push(a.accountId);
  return a;
}

beforeAll(async () => {
  app = await startTestApp();
});

afterAll(async () => {
  await app?.close();
});

describe("400", () => {
  it.each([
    ["truncated object", "{"],
    ["empty body", ""],
    ["plain text", "hello"],
    ["trailing garbage", '{"messages": []} x'],
  ])("invalid_json_body: %s", async (_name, body) => {
    const { apiKey } = await account();
    const reply = await postChat(app, apiKey, body);
    expectDetail(reply, 400, "invalid_json_body");
    expectKeyedHeaders(reply);
  });

  it.each([
    ["array", "[]"],
    ["array of objects", `[${JSON.stringify(chat)}]`],
    ["string", '"hello"'],
    ["number", "42"],
    ["boolean", "true"],
    ["null", "null"],
  ])("body_must_be_object: %s", async (_name, body) => {
    const { apiKey } = await account();
    const reply = await postChat(app, apiKey, body);
    expectDetail(reply, 400, "body_must_be_object");
    expectKeyedHeaders(reply);
  });
});

describe("401", () => {
  it.each([
    ["no header", undefined],
    ["Basic scheme", "Basic x"],
    ["Bearer without a token", "Bearer"],
    ["Bearer with only spaces", "Bearer   "],
  ])("missing_bearer_token: %s", async (_name, authorization) => {
    const reply = await postChat(app, undefined, chat, {
      headers: authorization === undefined ? {} : { authorization },
    });
    expectDetail(reply, 401, "missing_bearer_token");
  });

  it("missing_bearer_token on GET /v1/me", async () => {
    const res = await fetch(`${app.edgeUrl}/v1/me`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ detail: "missing_bearer_token" });
  });

  it.each([
    ["no prefix", "sk-abcdef"],
    ["prefix only", "svc_sk_"],
    ["short secret", "svc_sk_abc123"],
    ["bad checksum", () => `${generateApiKey().slice(0, -1)}!`],
    [
      "flipped checksum character",
      () => {
        const k = generateApiKey();
        return k.slice(0, -1) + (k.endsWith("A") ? "B" : "A");
      },
    ],
  ])("invalid_api_key: malformed (%s)", async (_name, key) => {
    const reply = await postChat(app, typeof key === "string" ? key : key(), chat);
    expectDetail(reply, 401, "invalid_api_key");
  });

  it("invalid_api_key: a well-formed key that was never issued", async () => {
    const reply = await postChat(app, generateApiKey(), chat);
    expectDetail(reply, 401, "invalid_api_key");
    const me = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${generateApiKey()}` } });
    expect(me.status).toBe(401);
    expect(await me.json()).toEqual({ detail: "invalid_api_key" });
  });

  it("invalid_api_key: a revoked key", async () => {
    const { apiKey, apiKeyId, accountId } = await account();
    const before = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(before.status).toBe(200);
    expect(await before.json()).toEqual({ id: accountId, email: null });
    await app.admin.revokeApiKey({ apiKeyId }, { headers: app.adminHeaders });
    await eventually(async () => expectDetail(await postChat(app, apiKey, chat), 401, "invalid_api_key"));
  });
});

describe("402", () => {
  it("onboarding_incomplete: onboarding not finished", async () => {
    const { apiKey } = await account({ onboarded: false });
    const reply = await postChat(app, apiKey, chat);
    expectStructured(reply, 402, "onboarding_incomplete", "billing_error");
    expectKeyedHeaders(reply);
  });

  it("onboarding_incomplete: onboarded but no spend cap set", async () => {
    const { account: a } = await app.admin.createAccount({ onboardingComplete: true }, { headers: app.adminHeaders });
    if (!a) throw new Error("no account");
    refusedAccounts.push(a.id);
    const key = await app.admin.createApiKey(
      { accountId: a.id, rateLimitRps: 1000, burst: 1000 },
      { headers: app.adminHeaders },
    );
    const reply = await postChat(app, key.secret, chat);
    expectStructured(reply, 402, "onboarding_incomplete", "billing_error");
  });

  it("spend_cap_exceeded with Retry-After = seconds to the next UTC month", async () => {
    const { apiKey } = await account({ capUsdMicros: 1n });
    const reply = await postChat(app, apiKey, chat);
    expectStructured(reply, 402, "spend_cap_exceeded", "billing_error");
    expectKeyedHeaders(reply);
    const seconds = expectRetryAfter(reply);
    expect(Math.abs(seconds - secondsToNextUtcMonth())).toBeLessThanOrEqual(5);
  });

  it("spend_cap_exceeded also refuses a streaming call with a 402 before the stream starts", async () => {
    const { apiKey } = await account({ capUsdMicros: 1n });
    const reply = await postChat(app, apiKey, { ...chat, stream: true });
    expectStructured(reply, 402, "spend_cap_exceeded", "billing_error");
    expectRetryAfter(reply);
  });

  it("payment_failed", async () => {
    const { apiKey, accountId } = await account();
    await app.admin.updateAccount({ accountId, paymentStatus: PaymentStatus.FAILED }, { headers: app.adminHeaders });
    const reply = await eventually(async () => {
      const r = await postChat(app, apiKey, chat);
      expect(r.status).toBe(402);
      return r;
    });
    expectStructured(reply, 402, "payment_failed", "billing_error");
    expectKeyedHeaders(reply);
  });

  it("subscription_canceled", async () => {
    const { apiKey, accountId } = await account();
    await app.admin.updateAccount(
      { accountId, subscriptionStatus: SubscriptionStatus.CANCELED },
      { headers: app.adminHeaders },
    );
    const reply = await eventually(async () => {
      const r = await postChat(app, apiKey, chat);
      expect(r.status).toBe(402);
      return r;
    });
    expectStructured(reply, 402, "subscription_canceled", "billing_error");
    expectKeyedHeaders(reply);
  });
});

describe("404 and 413", () => {
  it("model_not_found uses the detail envelope", async () => {
    const { apiKey } = await account();
    const reply = await postChat(app, apiKey, { ...chat, model: "no-such-model" });
    expectDetail(reply, 404, "model_not_found");
    expectKeyedHeaders(reply);
  });

  it("input_too_large above 32,768 tokens, well under 32 MiB", async () => {
    const { apiKey } = await account();
    const content = "word ".repeat(40_000);
    expect(content.length).toBeLessThan(1024 * 1024);
    const reply = await postChat(app, apiKey, { messages: [{ role: "user", content }] });
    expectStructured(reply, 413, "input_too_large", "invalid_request_error");
    expectKeyedHeaders(reply);
  });

  it("input_too_large counts every message, not only the last", async () => {
    const { apiKey } = await account();
    const half = "word ".repeat(17_000);
    const reply = await postChat(app, apiKey, {
      messages: [
        { role: "system", content: half },
        { role: "user", content: half },
      ],
    });
    expectStructured(reply, 413, "input_too_large", "invalid_request_error");
  });

  it("input_too_large on a legacy prompt", async () => {
    const { apiKey } = await account();
    const reply = await postChat(app, apiKey, { prompt: "word ".repeat(40_000) });
    expectStructured(reply, 413, "input_too_large", "invalid_request_error");
  });
});

describe("429", () => {
  it("api_key_rate_limited with Retry-After and the rate-limit headers", async () => {
    const { apiKey } = await account({ rps: 1, burst: 1 });
    const first = await postChat(app, apiKey, { ...chat, model: "no-such-model" });
    expect(first.status).toBe(404);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBeTruthy();
    const reply = await postChat(app, apiKey, chat);
    expectStructured(reply, 429, "api_key_rate_limited", "rate_limit_error");
    expectKeyedHeaders(reply);
    expect(reply.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expectRetryAfter(reply);
  });

  it("the limit applies to GET /v1/me too, and recovers after Retry-After", async () => {
    const { apiKey } = await account({ rps: 5, burst: 1 });
    const headers = { authorization: `Bearer ${apiKey}` };
    expect((await fetch(`${app.edgeUrl}/v1/me`, { headers })).status).toBe(200);
    const limited = await fetch(`${app.edgeUrl}/v1/me`, { headers });
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("api_key_rate_limited");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 250));
    expect((await fetch(`${app.edgeUrl}/v1/me`, { headers })).status).toBe(200);
  });
});

describe("success responses carry the keyed headers too", () => {
  it("200 chat and 200 /v1/me", async () => {
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    const ok = await postChat(app, apiKey, chat);
    expect(ok.status).toBe(200);
    expectKeyedHeaders(ok);
    const me = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(me.status).toBe(200);
    expect(me.headers.get("x-request-id")).toBeTruthy();
    expect(me.headers.get("x-ratelimit-limit-requests")).toBe("1000");
  });
});

describe("refused calls are free", () => {
  it("no refused account was charged, holds a reservation or has a usage record", async () => {
    expect(refusedAccounts.length).toBeGreaterThan(10);
    for (const id of refusedAccounts) {
      const balance = await balanceOf(app, id);
      expect({ id, spent: balance.spent, reserved: balance.reserved }).toEqual({ id, spent: 0n, reserved: 0n });
      expect(await usageRecordsOf(app, id)).toHaveLength(0);
    }
  });
});
