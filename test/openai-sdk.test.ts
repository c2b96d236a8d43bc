import OpenAI, { APIError, AuthenticationError, RateLimitError } from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES } from "./support/http.ts";

/**
 * The official `openai` npm client, pointed at the edge: SPEC's promise that "a client
 * written for that interface works once its base address is pointed at {base_url}".
 */
let app: TestApp;
let client: OpenAI;
let accountId: string;
const messages: ChatCompletionMessageParam[] = CHAT_MESSAGES.map((m) =>
  m.role === "system" ? { role: "system", content: m.content } : { role: "user", content: m.content },
);

const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${app.edgeUrl}/v1`, maxRetries: 0, timeout: 10_000 });

beforeAll(async () => {
  app = await startTestApp();
  const account = await app.newAccount({ rps: 1000, burst: 1000 });
  accountId = account.accountId;
  client = sdk(account.apiKey);
});

afterAll(async () => {
  await app?.close();
});

describe("openai SDK against the edge", () => {
  it("non-streaming chat returns a completion with populated usage", async () => {
    const out = await client.chat.completions.create({ model: "service-extract", messages, temperature: 0 });
    expect(out.id).toMatch(/^chatcmpl-/);
    expect(out.object).toBe("chat.completion");
    expect(out.model).toBe("service-extract");
    expect(out.choices).toHaveLength(1);
    const choice = out.choices[0];
    expect(choice?.message.role).toBe("assistant");
    expect(choice?.message.content?.length ?? 0).toBeGreaterThan(0);
    expect(choice?.finish_reason).toBe("stop");
    expect(out.usage).toBeDefined();
    const usage = out.usage;
    if (!usage) return;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  });

  it("an empty model name falls back to service-extract", async () => {
    // The SDK types require `model`; an empty string is what an untyped client would send.
    const out = await client.chat.completions.create({ model: "", messages, temperature: 0 });
    expect(out.model).toBe("service-extract");
  });

  it("streaming yields the same text as the non-streaming call at temperature 0, then usage", async () => {
    const whole = await client.chat.completions.create({ model: "service-extract", messages, temperature: 0 });
    const stream = await client.chat.completions.create({
      model: "service-extract",
      messages,
      temperature: 0,
      stream: true,
    });
    let text = "";
    let firstRole: string | undefined;
    let sawFirst = false;
    let finish: string | null = null;
    let usageChunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      expect(chunk.object).toBe("chat.completion.chunk");
      if (chunk.choices.length === 0) {
        usageChunks++;
        usage = chunk.usage ?? undefined;
        continue;
      }
      const choice = chunk.choices[0];
      if (!sawFirst) {
        firstRole = choice?.delta.role;
        sawFirst = true;
      }
      text += choice?.delta.content ?? "";
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    expect(firstRole).toBe("assistant");
    expect(text).toBe(whole.choices[0]?.message.content);
    expect(finish).toBe("stop");
    expect(usageChunks).toBe(1);
    expect(usage).toEqual(whole.usage);
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^chatcmpl-/);
  });

  it("models.list() includes service-extract", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      expect(model.object).toBe("model");
      ids.push(model.id);
    }
    expect(ids).toContain("service-extract");
  });

  it("the identity probe GET /v1/me answers the account id with a null email", async () => {
    const me = await client.get<{ id: string; email: null }>("/me");
    expect(me).toEqual({ id: accountId, email: null });
  });
});

describe("openai SDK errors", () => {
  it("402 spend_cap_exceeded surfaces as an APIError with status and code", async () => {
    const poor = await app.newAccount({ capUsdMicros: 1n, rps: 1000, burst: 1000 });
    const err = await sdk(poor.apiKey)
      .chat.completions.create({ model: "service-extract", messages })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    if (!(err instanceof APIError)) return;
    expect(err.status).toBe(402);
    expect(err.code).toBe("spend_cap_exceeded");
    expect(err.type).toBe("billing_error");
    expect(Number(err.headers?.get("retry-after"))).toBeGreaterThan(0);
    expect(err.requestID).toBeTruthy();
  });

  it("402 also surfaces on a streaming call before the stream starts", async () => {
    const poor = await app.newAccount({ capUsdMicros: 1n, rps: 1000, burst: 1000 });
    const err = await sdk(poor.apiKey)
      .chat.completions.create({ model: "service-extract", messages, stream: true })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    if (!(err instanceof APIError)) return;
    expect(err.status).toBe(402);
    expect(err.code).toBe("spend_cap_exceeded");
  });

  it("429 api_key_rate_limited surfaces as a RateLimitError without retries", async () => {
    const slow = await app.newAccount({ rps: 1, burst: 1 });
    const c = sdk(slow.apiKey);
    await c.chat.completions.create({ model: "service-extract", messages });
    const started = Date.now();
    const err = await c.chat.completions.create({ model: "service-extract", messages }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(900); // not retried after Retry-After
    expect(err).toBeInstanceOf(RateLimitError);
    if (!(err instanceof APIError)) return;
    expect(err.status).toBe(429);
    expect(err.code).toBe("api_key_rate_limited");
    expect(Number(err.headers?.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("401 invalid_api_key surfaces as an AuthenticationError", async () => {
    const err = await sdk("svc_sk_not-a-key")
      .chat.completions.create({ model: "service-extract", messages })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(AuthenticationError);
    if (!(err instanceof APIError)) return;
    expect(err.status).toBe(401);
  });

  it("404 for an unknown model surfaces as an APIError with status 404", async () => {
    const err = await client.chat.completions.create({ model: "no-such-model", messages }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(APIError);
    if (!(err instanceof APIError)) return;
    expect(err.status).toBe(404);
  });
});
