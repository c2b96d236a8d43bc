import OpenAI, { APIError, AuthenticationError, BadRequestError, InternalServerError, RateLimitError } from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  FAKE_UPSTREAM_MODEL,
  PROMPT_OVERHEAD_TOKENS,
  startFakeUpstream,
  UPSTREAM_SECRETS,
  type FakeUpstream,
} from "./fake-upstream.ts";

/** The fake upstream itself, driven by plain fetch and by the official `openai` client. */
let up: FakeUpstream;
const MODEL = "my-model";
const USER = "hello there my friend";
const ANSWER = `Echo: ${USER}`;
const messages = [
  { role: "system" as const, content: "be brief" },
  { role: "user" as const, content: USER },
];
const PROMPT_TOKENS = 2 + 4 + PROMPT_OVERHEAD_TOKENS;

const sdk = (apiKey = "x") => new OpenAI({ baseURL: up.url, apiKey, maxRetries: 0, timeout: 5_000 });

interface ErrorJson {
  error: { message: string; type: string; code: string | null };
}

function postChat(body: object, init: RequestInit = {}): Promise<Response> {
  return fetch(`${up.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer x" },
    body: JSON.stringify({ model: MODEL, messages, ...body }),
    ...init,
  });
}

/** Every `data:` payload of a complete SSE body, in order. */
function sseData(text: string): string[] {
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((frame) => {
      expect(frame.startsWith("data: ")).toBe(true);
      return frame.slice("data: ".length);
    });
}

async function sdkStream(includeUsage: boolean, maxTokens?: number): Promise<ChatCompletionChunk[]> {
  const stream = await sdk().chat.completions.create({
    model: MODEL,
    messages,
    stream: true,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
  });
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const contentOf = (chunks: ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");

/** Reads from a streaming response until `count` complete frames arrived; returns their text. */
async function readFrames(res: Response, count: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) throw new Error("no body");
  const decoder = new TextDecoder();
  let text = "";
  while (text.split("\n\n").length - 1 < count) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended after ${JSON.stringify(text)}`);
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

beforeAll(async () => {
  up = await startFakeUpstream();
});
afterEach(() => {
  up.reset();
});
afterAll(async () => {
  await up?.close();
});

describe("fake upstream: normal answers", () => {
  it("lists its model at GET /v1/models", async () => {
    const res = await fetch(`${up.url}/models`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ object: "list", data: [{ id: FAKE_UPSTREAM_MODEL, object: "model" }] });
    const models = await sdk().models.list();
    expect(models.data.map((m) => m.id)).toEqual([FAKE_UPSTREAM_MODEL]);
    expect(up.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it("answers a non-streaming chat like OpenAI and records the request", async () => {
    const completion = await sdk().chat.completions.create({ model: MODEL, messages });
    expect(completion.id).toMatch(/^chatcmpl-up/);
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe(MODEL);
    expect(typeof completion.created).toBe("number");
    expect(completion.choices).toEqual([
      expect.objectContaining({
        index: 0,
        message: expect.objectContaining({ role: "assistant", content: ANSWER }),
        finish_reason: "stop",
      }),
    ]);
    expect(completion.usage).toEqual({
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: 5,
      total_tokens: PROMPT_TOKENS + 5,
    });
    const rec = await up.waitForRequest(0);
    expect(rec).toMatchObject({
      method: "POST",
      path: "/v1/chat/completions",
      aborted: false,
      finished: true,
      mode: "ok",
    });
    expect(rec.headers.authorization).toBe("Bearer x");
    expect(rec.headers["content-type"]).toContain("application/json");
    expect(rec.body).toMatchObject({ model: MODEL, messages });
    expect(up.inFlight()).toBe(0);
  });

  it("cuts the answer to max_tokens words with finish_reason length", async () => {
    const completion = await sdk().chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    expect(completion.choices[0]?.message.content).toBe("Echo: hello");
    expect(completion.choices[0]?.finish_reason).toBe("length");
    expect(completion.usage?.completion_tokens).toBe(2);
    up.promptTokens = 7;
    const chunks = await sdkStream(true, 3);
    expect(contentOf(chunks)).toBe("Echo: hello there");
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("length");
    expect(chunks.at(-1)?.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  });

  it("streams role first, one word per chunk, a finish chunk, and no usage without include_usage", async () => {
    const chunks = await sdkStream(false);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.object)).toEqual(chunks.map(() => "chat.completion.chunk"));
    expect(chunks.slice(1, -1).map((c) => c.choices[0]?.delta.content)).toEqual([
      "Echo:",
      " hello",
      " there",
      " my",
      " friend",
    ]);
    expect(contentOf(chunks)).toBe(ANSWER);
    expect(chunks.at(-1)?.choices[0]).toMatchObject({ delta: {}, finish_reason: "stop" });
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it("adds a vLLM-style usage chunk (choices: []) only with include_usage, before [DONE]", async () => {
    const chunks = await sdkStream(true);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual({
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: 5,
      total_tokens: PROMPT_TOKENS + 5,
    });
    expect(chunks.filter((c) => c.usage).length).toBe(1);
    const res = await postChat({ stream: true, stream_options: { include_usage: true } });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    expect(JSON.parse(data.at(-2) ?? "")).toMatchObject({ choices: [], usage: { completion_tokens: 5 } });
  });

  it("never sends usage in no-usage mode", async () => {
    up.mode = "no-usage";
    const res = await postChat({});
    const json: unknown = await res.json();
    expect(json).toMatchObject({ choices: [{ message: { content: ANSWER } }] });
    expect(json).not.toHaveProperty("usage");
    const chunks = await sdkStream(true);
    expect(contentOf(chunks)).toBe(ANSWER);
    expect(chunks.some((c) => c.usage)).toBe(false);
  });

  it("paces chunks by chunkDelayMs", async () => {
    up.chunkDelayMs = 40;
    const started = performance.now();
    await sdkStream(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(6 * 40 - 10);
  });
});

describe("fake upstream: errors", () => {
  it.each([
    ["status-429", 429, RateLimitError],
    ["status-500", 500, InternalServerError],
    ["status-400", 400, BadRequestError],
  ] as const)("%s answers %i with an OpenAI error body full of secrets", async (mode, status, ErrorClass) => {
    up.mode = mode;
    const res = await postChat({});
    expect(res.status).toBe(status);
    expect(res.headers.get("retry-after")).toBe(status === 429 ? "1" : null);
    const body = (await res.json()) as ErrorJson;
    expect(typeof body.error.type).toBe("string");
    expect(typeof body.error.code).toBe("string");
    for (const secret of UPSTREAM_SECRETS) expect(body.error.message).toContain(secret);
    const failure = await sdk()
      .chat.completions.create({ model: MODEL, messages })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ErrorClass);
    expect(failure instanceof APIError ? failure.status : undefined).toBe(status);
  });

  it("behave picks the mode per request: first fails, second succeeds", async () => {
    const seen: number[] = [];
    up.behave = (n, body) => {
      seen.push(n);
      expect(body.model).toBe(MODEL);
      return n === 0 ? "status-500" : "ok";
    };
    expect((await postChat({})).status).toBe(500);
    expect((await postChat({})).status).toBe(200);
    expect(seen).toEqual([0, 1]);
    expect(up.requests.map((r) => r.mode)).toEqual(["status-500", "ok"]);
  });

  it("stall-before-headers: a fetch times out and the request is recorded as aborted", async () => {
    up.mode = "stall-before-headers";
    const failure = await postChat({}, { signal: AbortSignal.timeout(300) }).catch((e: unknown) => e);
    expect(failure instanceof Error ? failure.name : failure).toBe("TimeoutError");
    await up.waitForAbort(0, 2_000);
    expect(up.requests[0]).toMatchObject({ aborted: true, finished: false, mode: "stall-before-headers" });
    await expect.poll(() => up.inFlight()).toBe(0);
  });

  it("stall-mid-stream: sends role + two words, then nothing; a client abort is recorded", async () => {
    up.mode = "stall-mid-stream";
    const controller = new AbortController();
    const res = await postChat({ stream: true }, { signal: controller.signal });
    const text = await readFrames(res, 3);
    expect(
      sseData(text)
        .map((d) => JSON.parse(d) as ChatCompletionChunk)
        .map((c) => c.choices[0]?.delta.content),
    ).toEqual(["", "Echo:", " hello"]);
    await new Promise((r) => setTimeout(r, 200));
    expect(up.inFlight()).toBe(1);
    expect(up.requests[0]?.aborted).toBe(false);
    controller.abort();
    await up.waitForAbort(0, 2_000);
  });

  it("die-mid-stream: the SDK stream throws after the first chunks; not counted as a client abort", async () => {
    up.mode = "die-mid-stream";
    const got: string[] = [];
    const failure = await (async () => {
      for await (const chunk of await sdk().chat.completions.create({ model: MODEL, messages, stream: true }))
        got.push(chunk.choices[0]?.delta.content ?? "");
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(got).toEqual(["", "Echo:", " hello"]);
    await expect.poll(() => up.inFlight()).toBe(0);
    expect(up.requests[0]).toMatchObject({ aborted: false, finished: false });
  });

  it("waitForAbort rejects on timeout when the request was not aborted", async () => {
    expect((await postChat({})).status).toBe(200);
    await expect(up.waitForAbort(0, 100)).rejects.toThrow(/timed out/);
  });
});

describe("fake upstream: going down and auth", () => {
  it("stop() refuses connections and kills open requests; start() comes back on the same port", async () => {
    up.mode = "stall-before-headers";
    const pending = postChat({}).catch((e: unknown) => e);
    await up.waitForRequest(0);
    const url = up.url;
    await up.stop();
    expect(await pending).toBeInstanceOf(TypeError);
    const refused = await fetch(`${url}/models`).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TypeError);
    const cause = refused instanceof TypeError ? refused.cause : undefined;
    expect(cause).toMatchObject({ code: "ECONNREFUSED" });
    expect(up.requests[0]?.aborted).toBe(false);
    await up.start();
    expect(up.url).toBe(url);
    up.mode = "ok";
    expect((await postChat({})).status).toBe(200);
  });

  it("listens on a given port", async () => {
    const first = await startFakeUpstream();
    const port = first.port;
    await first.close();
    const second = await startFakeUpstream({ port });
    try {
      expect(second.url).toBe(`http://127.0.0.1:${port}/v1`);
      expect((await fetch(`${second.url}/models`)).status).toBe(200);
    } finally {
      await second.close();
    }
  });

  it("enforces apiKey when set", async () => {
    const guarded = await startFakeUpstream({ apiKey: "sk-good" });
    try {
      const none = await fetch(`${guarded.url}/models`);
      expect(none.status).toBe(401);
      expect(((await none.json()) as ErrorJson).error.code).toBe("invalid_api_key");
      const bad = new OpenAI({ baseURL: guarded.url, apiKey: "sk-bad", maxRetries: 0 });
      await expect(bad.chat.completions.create({ model: MODEL, messages })).rejects.toBeInstanceOf(AuthenticationError);
      const good = new OpenAI({ baseURL: guarded.url, apiKey: "sk-good", maxRetries: 0 });
      expect((await good.chat.completions.create({ model: MODEL, messages })).choices[0]?.message.content).toBe(ANSWER);
      expect(guarded.requests.map((r) => r.headers.authorization)).toEqual([
        undefined,
        "Bearer sk-bad",
        "Bearer sk-good",
      ]);
    } finally {
      await guarded.close();
    }
  });
});
