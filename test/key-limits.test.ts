import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedEngine, registryWith } from "./support/engines.ts";
import { expectRetryHeaders, expectStructured, secondsToNextUtcMonth } from "./support/envelopes.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat } from "./support/http.ts";

/**
 * A key's own spend cap and tokens-per-minute limit over HTTP (issue 11, items 1 and 2), with the
 * official `openai` SDK and with fetch, on whichever store the project runs: the 402 of a key's
 * spent cap, the 429 of a token budget with its wait and OpenAI's `x-ratelimit-*-tokens` headers,
 * and those headers on every chat response of a key with a limit. `twenty` answers 20 tokens.
 */
const RESET = /^(\d+ms|(\d+h)?(\d+m)?\d+(\.\d+)?s)$/;
const tokenHeaders = (h: Headers) => ({
  limit: h.get("x-ratelimit-limit-tokens"),
  remaining: Number(h.get("x-ratelimit-remaining-tokens")),
  reset: h.get("x-ratelimit-reset-tokens") ?? "",
});

const messages: ChatCompletionMessageParam[] = CHAT_MESSAGES.map((m) =>
  m.role === "system" ? { role: "system", content: m.content } : { role: "user", content: m.content },
);

let app: TestApp;

beforeAll(async () => {
  const twenty = scriptedEngine({ deltas: Array.from({ length: 20 }, () => " a") });
  app = await startTestApp({}, { models: registryWith([{ name: "twenty", engine: twenty }]) });
});

afterAll(async () => {
  await app?.close();
});

/** A key of a new account ($10 cap) with limits of its own, and an SDK client that does not retry. */
async function keyWith(limits: { spendCapUsdMicros?: bigint; tokensPerMinute?: number }) {
  const { accountId, apiKey: accountKey } = await app.newAccount({ rps: 1_000, burst: 1_000 });
  const made = await app.admin.createApiKey(
    { accountId, rateLimitRps: 1_000, burst: 1_000, ...limits },
    {
      headers: app.adminHeaders,
    },
  );
  const client = new OpenAI({ baseURL: `${app.edgeUrl}/v1`, apiKey: made.secret, maxRetries: 0 });
  return { accountId, apiKeyId: made.apiKey?.id ?? "", secret: made.secret, client, accountKey };
}

describe("a key's tokens-per-minute limit over HTTP", () => {
  it("reports the budget on each chat response, and refuses a call it cannot cover with 429 and the wait", async () => {
    const { client, secret } = await keyWith({ tokensPerMinute: 200 });
    const { data, response } = await client.chat.completions
      .create({ model: "twenty", messages, max_tokens: 100 })
      .withResponse();
    const prompt = data.usage?.prompt_tokens ?? 0;
    expect(data.usage?.completion_tokens).toBe(20);
    const first = tokenHeaders(response.headers);
    expect(first.limit).toBe("200");
    // The call took its prompt and its max_tokens.
    expect(first.remaining).toBe(200 - prompt - 100);
    expect(first.reset).toMatch(RESET);

    // It used 80 fewer than it took, which came back; 150 more is still too many.
    const refused = await client.chat.completions.create({ model: "twenty", messages, max_tokens: 150 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const err = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(err.status).toBe(429);
    expect(err.code).toBe("api_key_rate_limited");
    expect(err.message).toMatch(/tokens-per-minute/);
    const headers = new Headers(err.headers);
    const budget = tokenHeaders(headers);
    expect(budget.limit).toBe("200");
    expect(budget.remaining).toBeGreaterThanOrEqual(200 - prompt - 20);
    expect(budget.remaining).toBeLessThan(prompt + 150);
    // 300 ms per token missing, in both of OpenAI's retry headers.
    const waitMs = Number(headers.get("retry-after-ms"));
    expect(waitMs).toBeGreaterThan(0);
    expect(waitMs).toBeLessThanOrEqual((prompt + 150 - budget.remaining) * 300);
    expect(Number(headers.get("retry-after"))).toBe(Math.max(1, Math.ceil(waitMs / 1000)));

    // The same refusal as fetch sees it: SPEC's structured envelope, streamed or not.
    for (const stream of [false, true]) {
      const reply = await postChat(app, secret, { model: "twenty", messages: CHAT_MESSAGES, max_tokens: 150, stream });
      expectStructured(reply, 429, "api_key_rate_limited", "rate_limit_error");
      expectRetryHeaders(reply);
      expect(tokenHeaders(reply.headers).limit).toBe("200");
      expect(reply.headers.get("x-ratelimit-limit-requests")).toBe("1000");
    }
  });

  it("sends the token headers on a stream, and none for a key without a limit", async () => {
    const limited = await keyWith({ tokensPerMinute: 100_000 });
    const reply = await postChat(app, limited.secret, { model: "twenty", messages: CHAT_MESSAGES, stream: true });
    expect(reply.status).toBe(200);
    expect(tokenHeaders(reply.headers)).toMatchObject({ limit: "100000" });
    expect(tokenHeaders(reply.headers).reset).toMatch(RESET);
    const plain = await keyWith({});
    const unlimited = await postChat(app, plain.secret, { model: "twenty", messages: CHAT_MESSAGES });
    expect(unlimited.status).toBe(200);
    expect(unlimited.headers.get("x-ratelimit-limit-tokens")).toBeNull();
  });
});

describe("a key's own spend cap over HTTP", () => {
  it("refuses a call past the key's cap with 402 spend_cap_exceeded while the account has room", async () => {
    const capped = await keyWith({ spendCapUsdMicros: 1_000n });
    const first = await capped.client.chat.completions.create({ model: "twenty", messages, max_tokens: 1 });
    // `twenty` answers 20 tokens whatever max_tokens says: the hold grew as they came.
    const cost = (first.usage?.prompt_tokens ?? 0) + 2 * (first.usage?.completion_tokens ?? 0);
    // The operator lowers the key's cap to 1 micro above its spend: too little for another call.
    const lowered = await app.admin.updateApiKey(
      { apiKeyId: capped.apiKeyId, spendCapUsdMicros: BigInt(cost + 1) },
      { headers: app.adminHeaders },
    );
    expect(lowered.apiKey).toMatchObject({ spendCapUsdMicros: BigInt(cost + 1), spentUsdMicros: BigInt(cost) });
    const refused = await capped.client.chat.completions.create({ model: "twenty", messages, max_tokens: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    const err = refused as InstanceType<typeof OpenAI.APIError>;
    expect({ status: err.status, code: err.code }).toEqual({ status: 402, code: "spend_cap_exceeded" });
    expect(err.message).toMatch(/API key's monthly spend cap/);
    const reply = await postChat(app, capped.secret, { model: "twenty", messages: CHAT_MESSAGES, max_tokens: 1 });
    expectStructured(reply, 402, "spend_cap_exceeded", "billing_error");
    // Spent for the month: the wait is until the next one.
    expect(Math.abs(expectRetryHeaders(reply).seconds - secondsToNextUtcMonth())).toBeLessThanOrEqual(5);

    // Another key of the same account still works; each key shows its own spend.
    const ok = await postChat(app, capped.accountKey, { model: "twenty", messages: CHAT_MESSAGES, max_tokens: 1 });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ usage: first.usage });
    const keys = await app.admin.listApiKeys({ accountId: capped.accountId }, { headers: app.adminHeaders });
    expect(keys.apiKeys.find((k) => k.id === capped.apiKeyId)).toMatchObject({
      spendCapUsdMicros: BigInt(cost + 1),
      spentUsdMicros: BigInt(cost),
    });
    expect(keys.apiKeys.find((k) => k.id !== capped.apiKeyId)?.spentUsdMicros).toBe(BigInt(cost));
  });
});
