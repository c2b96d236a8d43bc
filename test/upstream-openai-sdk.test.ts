import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import OpenAI from "openai";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import type { Client } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  FAKE_UPSTREAM_MODEL,
  PROMPT_OVERHEAD_TOKENS,
  startFakeUpstream,
  type FakeUpstream,
} from "./support/fake-upstream.ts";
import { grpcClient, loadProtos, metadataOf, methodOf, serverStream } from "./support/grpc.ts";
import { postChat } from "./support/http.ts";
import {
  chatRequests,
  expectBilledOnce,
  lastChatBody,
  llamaCost,
  startUpstreamApp,
  type UpstreamApp,
} from "./support/upstream-app.ts";
import { balanceOf } from "./support/ledger.ts";

/**
 * README "Real model servers": `llama-3.1-8b` mapped to an OpenAI-compatible server (a fake
 * vLLM on loopback) keeps the whole contract for the official `openai` client and for gRPC
 * callers; Sluice always streams upstream with usage, bills from the upstream's usage, and
 * forwards only the parameters it validated.
 */
const MODEL = "llama-3.1-8b";
const UPSTREAM_KEY = "vllm-key-0123456789abcdef";
const SYSTEM = "You are a terse assistant";
const USER = "name the largest planet of the solar system";
const ANSWER = `Echo: ${USER}`;
const messages: ChatCompletionMessageParam[] = [
  { role: "system", content: SYSTEM },
  { role: "user", content: USER },
];
const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
/** The vLLM-shaped usage the fake reports for `messages`. */
const UPSTREAM_USAGE = {
  prompt_tokens: words(SYSTEM) + words(USER) + PROMPT_OVERHEAD_TOKENS,
  completion_tokens: words(ANSWER),
  total_tokens: words(SYSTEM) + words(USER) + PROMPT_OVERHEAD_TOKENS + words(ANSWER),
};

let upstream: FakeUpstream;
let app: UpstreamApp;

const sdk = (apiKey: string) => new OpenAI({ baseURL: `${app.edgeUrl}/v1`, apiKey, maxRetries: 0, timeout: 10_000 });
const account = () => app.newAccount({ rps: 1000, burst: 1000 });

beforeAll(async () => {
  // The fake refuses any request without the right bearer: apiKeyEnv must reach it.
  upstream = await startFakeUpstream({ apiKey: UPSTREAM_KEY });
  app = await startUpstreamApp(
    [{ name: MODEL, baseUrl: upstream.url, upstreamModel: FAKE_UPSTREAM_MODEL, apiKeyEnv: "VLLM_API_KEY" }],
    { lookupEnv: { VLLM_API_KEY: UPSTREAM_KEY } },
  );
});

afterAll(async () => {
  await app?.close();
  await upstream?.close();
});

/** Asserts what every upstream call must look like, whatever the client asked. */
function expectStreamedUpstreamCall(): Record<string, unknown> {
  const last = chatRequests(upstream).at(-1);
  expect(last?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  const body = lastChatBody(upstream);
  expect(body.model).toBe(FAKE_UPSTREAM_MODEL);
  expect(body.stream).toBe(true);
  expect(body.stream_options).toEqual({ include_usage: true });
  return body;
}

describe("the openai SDK against an upstream model", () => {
  it("non-streaming: the upstream's answer and usage, billed from that usage once", async () => {
    const { apiKey, accountId } = await account();
    const out = await sdk(apiKey).chat.completions.create({ model: MODEL, messages });
    expect(out.object).toBe("chat.completion");
    expect(out.id).toMatch(/^chatcmpl-/);
    expect(out.model).toBe(MODEL);
    expect(out.choices).toHaveLength(1);
    expect(out.choices[0]?.message.role).toBe("assistant");
    expect(out.choices[0]?.message.content).toBe(ANSWER);
    expect(out.choices[0]?.finish_reason).toBe("stop");
    expect(out.usage).toEqual(UPSTREAM_USAGE);
    expectStreamedUpstreamCall();
    await expectBilledOnce(app, accountId, MODEL, UPSTREAM_USAGE);
  });

  it("streaming: the same text in chunks, one usage chunk equal to the upstream's, billed once", async () => {
    const { apiKey, accountId } = await account();
    const stream = await sdk(apiKey).chat.completions.create({ model: MODEL, messages, stream: true });
    let text = "";
    let finish: string | null = null;
    const usages: OpenAI.CompletionUsage[] = [];
    const ids = new Set<string>();
    for await (const chunk of stream) {
      ids.add(chunk.id);
      expect(chunk.model).toBe(MODEL);
      if (chunk.choices.length === 0) {
        if (chunk.usage) usages.push(chunk.usage);
        continue;
      }
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe(ANSWER);
    expect(finish).toBe("stop");
    expect(usages).toEqual([UPSTREAM_USAGE]);
    expect(ids.size).toBe(1);
    expectStreamedUpstreamCall();
    await expectBilledOnce(app, accountId, MODEL, UPSTREAM_USAGE);
  });

  it("passes the standard parameters through as sent, and nothing else", async () => {
    const { apiKey } = await account();
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "get_weather",
          description: "Weather of a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const params = {
      temperature: 0.7,
      top_p: 0.9,
      stop: ["\nUser:", "<END>"],
      seed: 42,
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      user: "end-user-7",
      tools,
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      response_format: { type: "json_object" as const },
      logprobs: true,
      top_logprobs: 3,
      max_tokens: 64,
    } satisfies Omit<ChatCompletionCreateParamsNonStreaming, "model" | "messages">;
    const out = await sdk(apiKey).chat.completions.create({ model: MODEL, messages, ...params });
    expect(out.choices[0]?.message.content).toBe(ANSWER);
    const body = expectStreamedUpstreamCall();
    const { model: _m, messages: sent, stream: _s, stream_options: _o, ...passed } = body;
    expect(passed).toEqual(params);
    expect(sent).toEqual([
      { role: "system", content: SYSTEM },
      { role: "user", content: USER },
    ]);
  });

  it("max_tokens above 4,096 reaches the upstream clamped to 4,096", async () => {
    const { apiKey } = await account();
    await sdk(apiKey).chat.completions.create({ model: MODEL, messages, max_tokens: 100_000 });
    expect(expectStreamedUpstreamCall().max_tokens).toBe(4096);
  });

  it("unknown client fields are dropped, never forwarded (raw fetch)", async () => {
    const { apiKey } = await account();
    const reply = await postChat(app, apiKey, {
      model: MODEL,
      messages: [
        { role: "system", content: SYSTEM, secret_note: "x" },
        { role: "user", content: USER },
      ],
      foo: 1,
      metadata: { tenant: "t1" },
      store: true,
      stream_options: { include_usage: false, extra: 1 },
    });
    expect(reply.status).toBe(200);
    expect((reply.json as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content).toBe(
      ANSWER,
    );
    const body = expectStreamedUpstreamCall();
    expect(Object.keys(body).sort()).toEqual(["max_tokens", "messages", "model", "stream", "stream_options"]);
    expect(body).not.toHaveProperty("foo");
    expect(body.messages).toEqual([
      { role: "system", content: SYSTEM },
      { role: "user", content: USER },
    ]);
  });
});

describe("an upstream that reports no usage", () => {
  it("is billed from local o200k_base counting, consistently with the usage it reports", async () => {
    const { apiKey, accountId } = await account();
    const client = sdk(apiKey);
    // The built-in model counts the prompt locally with o200k_base: the reference count.
    const reference = await client.chat.completions.create({ model: "service-extract", messages });
    const referencePrompt = reference.usage?.prompt_tokens ?? 0;
    const spentBefore = (await balanceOf(app, accountId)).spent;
    upstream.mode = "no-usage";
    try {
      const stream = await client.chat.completions.create({ model: MODEL, messages, stream: true });
      let text = "";
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        if (chunk.choices.length === 0 && chunk.usage) usage = chunk.usage;
      }
      expect(text).toBe(ANSWER);
      expect(chatRequests(upstream).at(-1)?.mode).toBe("no-usage");
      if (!usage) throw new Error("no usage chunk");
      expect(usage.prompt_tokens).toBe(referencePrompt);
      expect(usage.completion_tokens).toBe(countTokens(ANSWER));
      expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
      expect(usage).not.toEqual(UPSTREAM_USAGE);
      const balance = await balanceOf(app, accountId);
      expect(balance.spent - spentBefore).toBe(llamaCost(usage.prompt_tokens, usage.completion_tokens));
      expect(balance.reserved).toBe(0n);
    } finally {
      upstream.mode = "ok";
    }
  });
});

describe("gRPC callers on the core port", () => {
  const usageSchema = z.object({ promptTokens: z.string(), completionTokens: z.string(), totalTokens: z.string() });
  const eventSchema = z.object({
    id: z.string(),
    model: z.string(),
    event: z.enum(["delta", "finishReason", "usage", "toolCalls"]),
    delta: z.string().optional(),
    finishReason: z.string().optional(),
    usage: usageSchema.optional(),
  });
  let client: Client;

  beforeAll(() => {
    if (!app.coreUrl) throw new Error("no core");
    client = grpcClient(app.coreUrl);
  });

  afterAll(() => {
    client?.close();
  });

  it("CompletionService/StreamChatCompletion (grpc-js) streams the upstream's answer and usage", async () => {
    const { apiKey, accountId } = await account();
    const streamChat = methodOf(loadProtos(), "sluice.completion.v1.CompletionService", "StreamChatCompletion");
    const request = {
      params: {
        model: MODEL,
        messages: [
          { role: "system", content: SYSTEM },
          { role: "user", content: USER },
        ],
      },
    };
    const { messages: received, error } = await serverStream(
      client,
      streamChat,
      request,
      metadataOf({ authorization: `Bearer ${apiKey}` }),
    );
    expect(error).toBeUndefined();
    const events = received.map((m) => eventSchema.parse(m));
    const deltas = events.filter((e) => e.event === "delta");
    expect(deltas.map((e) => e.delta ?? "").join("")).toBe(ANSWER);
    expect(events.at(-2)).toMatchObject({ event: "finishReason", finishReason: "FINISH_REASON_STOP" });
    expect(events.at(-1)?.usage).toEqual({
      promptTokens: String(UPSTREAM_USAGE.prompt_tokens),
      completionTokens: String(UPSTREAM_USAGE.completion_tokens),
      totalTokens: String(UPSTREAM_USAGE.total_tokens),
    });
    for (const e of events) expect(e.model).toBe(MODEL);
    expectStreamedUpstreamCall();
    await expectBilledOnce(app, accountId, MODEL, UPSTREAM_USAGE);
  });
});
