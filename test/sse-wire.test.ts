import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectKeyedHeaders } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { registryWith, scriptedEngine } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { asRecord, CHAT_MESSAGES, postChat, type Reply } from "./support/http.ts";
import { chunksOf, parseSse, streamedText, type SseFrame } from "./support/sse.ts";

/**
 * The raw bytes of a chat stream: frame syntax, chunk order, the usage chunk, the
 * terminator, keep-alives, and the two mid-stream error events of SPEC with their billing.
 */
const TEN = Array.from({ length: 10 }, (_, i) => ` t${i}`);
const failMid = scriptedEngine({ deltas: TEN, failAfter: { deltas: 2, error: () => new Error("engine exploded") } });
// Output at 1 micro per token, prompt at 1 micro per million: a cap of 10 covers the prompt
// and nine output tokens, far less than the 50 the engine wants to send.
const greedy = scriptedEngine({ deltas: Array.from({ length: 50 }, (_, i) => ` w${i}`) });
const CAP = 10n;

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp(
    {},
    {
      models: registryWith([
        { name: "fail-mid", engine: failMid },
        { name: "greedy", engine: greedy, inputUsdMicrosPerMillion: 1, outputUsdMicrosPerMillion: 1_000_000 },
      ]),
    },
  );
});

afterAll(async () => {
  await app?.close();
});

async function stream(
  body: Record<string, unknown>,
  capUsdMicros?: bigint,
): Promise<{ reply: Reply; frames: SseFrame[]; accountId: string }> {
  const { apiKey, accountId } = await app.newAccount({
    rps: 1000,
    burst: 1000,
    ...(capUsdMicros !== undefined && { capUsdMicros }),
  });
  const reply = await postChat(app, apiKey, { messages: CHAT_MESSAGES, ...body, stream: true });
  expect(reply.status).toBe(200);
  expect(reply.headers.get("content-type")).toMatch(/^text\/event-stream/);
  return { reply, frames: parseSse(reply.text), accountId };
}

describe("a completed stream on the wire", () => {
  it("is data frames of chunks, then one usage chunk, then exactly data: [DONE]", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { reply, frames } = await stream({ temperature: 0 });
    expectKeyedHeaders(reply);
    for (const f of frames) expect(f.raw).toMatch(/^data: [^\n]+$/);
    expect(reply.text.endsWith("\n\ndata: [DONE]\n\n")).toBe(true);
    expect(frames.filter((f) => f.data === "[DONE]")).toHaveLength(1);

    const chunks = chunksOf(frames);
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    const content = chunks.slice(0, -1);
    const usageChunk = chunks[chunks.length - 1];
    const id = chunks[0]?.id;
    expect(id).toMatch(/^chatcmpl-/);
    for (const c of chunks) {
      expect(c.id).toBe(id);
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.model).toBe("service-extract");
      expect(Number.isInteger(c.created)).toBe(true);
      expect(c.created).toBeGreaterThanOrEqual(before - 1);
    }
    expect(content[0]?.choices[0]?.delta.role).toBe("assistant");
    for (const c of content) expect(c.choices).toHaveLength(1);
    for (const c of content.slice(0, -1)) expect(c.choices[0]?.finish_reason).toBeNull();
    expect(content[content.length - 1]?.choices[0]?.finish_reason).toBe("stop");

    expect(usageChunk?.choices).toEqual([]);
    const usage = usageChunk?.usage;
    expect(usage?.prompt_tokens).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(usage?.total_tokens).toBe((usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0));

    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    const whole = asRecord((await postChat(app, apiKey, { messages: CHAT_MESSAGES, temperature: 0 })).json);
    const choices = whole.choices as Array<{ message: { content: string } }>;
    expect(streamedText(content)).toBe(choices[0]?.message.content);
    expect(whole.usage).toEqual(usage);
  });

  it("max_tokens: 3 ends with finish_reason length and completion_tokens 3", async () => {
    const { frames } = await stream({ max_tokens: 3 });
    const chunks = chunksOf(frames);
    const content = chunks.slice(0, -1);
    expect(content[content.length - 1]?.choices[0]?.finish_reason).toBe("length");
    expect(chunks[chunks.length - 1]?.usage?.completion_tokens).toBe(3);
    expect(frames[frames.length - 1]?.raw).toBe("data: [DONE]");
  });

  it.each([0, 5000, 2.5, -1])("max_tokens %s is treated as 4,096 (the full answer, finish stop)", async (maxTokens) => {
    const full = chunksOf((await stream({})).frames);
    const clamped = chunksOf((await stream({ max_tokens: maxTokens })).frames);
    expect(streamedText(clamped.slice(0, -1))).toBe(streamedText(full.slice(0, -1)));
    expect(clamped[clamped.length - 2]?.choices[0]?.finish_reason).toBe("stop");
  });

  it("stop cuts the answer before the stop string with finish_reason stop", async () => {
    const full = streamedText(chunksOf((await stream({})).frames).slice(0, -1));
    expect(full.length).toBeGreaterThan(10);
    const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 4);
    const { frames } = await stream({ stop: [stop] });
    const chunks = chunksOf(frames);
    const content = chunks.slice(0, -1);
    expect(streamedText(content)).toBe(full.slice(0, full.indexOf(stop)));
    expect(content[content.length - 1]?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks[chunks.length - 1]?.usage?.completion_tokens).toBeLessThan(full.length);
  });
});

describe("errors after the stream has started", () => {
  it("an internal failure after 2 deltas sends the service_unavailable event then [DONE], unbilled", async () => {
    const { frames, accountId } = await stream({ model: "fail-mid" });
    const raws = frames.map((f) => f.raw);
    expect(raws.slice(-2)).toEqual(['data: {"error":"service_unavailable","status":500}', "data: [DONE]"]);
    const chunks = chunksOf(frames.slice(0, -2));
    expect(streamedText(chunks)).toBe(" t0 t1");
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.some((c) => c.usage !== undefined)).toBe(false);
    const balance = await balanceOf(app, accountId);
    expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });

  it("a spend-cap abort sends event: error with the code and no [DONE]; delivered chunks are billed", async () => {
    const { reply, frames, accountId } = await stream({ model: "greedy" }, CAP);
    expect(reply.text).not.toContain("[DONE]");
    const last = frames[frames.length - 1];
    expect(last?.event).toBe("error");
    expect(last?.raw).toMatch(/^event: error\ndata: \{[^\n]+\}$/);
    const payload = asRecord(JSON.parse(last?.data ?? "null"));
    expect(payload.code).toBe("spend_cap_exceeded");
    expect(typeof payload.message).toBe("string");
    expect(() => new URL(String(payload.docs_url))).not.toThrow();
    expect(frames.filter((f) => f.event !== undefined)).toHaveLength(1);

    const chunks = chunksOf(frames.slice(0, -1));
    const delivered = chunks.length;
    expect(delivered).toBeGreaterThan(0);
    expect(delivered).toBeLessThan(50);
    expect(chunks.some((c) => c.usage !== undefined)).toBe(false);
    expect(streamedText(chunks)).toBe(Array.from({ length: delivered }, (_, i) => ` w${i}`).join(""));

    const balance = await balanceOf(app, accountId);
    // The prompt costs one micro (rounded up), each delivered token one micro.
    expect(balance.spent).toBe(BigInt(delivered) + 1n);
    expect(balance.spent).toBeLessThanOrEqual(CAP);
    expect(balance.reserved).toBe(0n);
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });
});

describe("keep-alive", () => {
  let slow: TestApp;
  const stallMid = scriptedEngine({ deltas: ["a", "b", "c"], stallAfter: { deltas: 1, ms: 700 } });
  const stallFirst = scriptedEngine({ deltas: ["a", "b"], stallAfter: { deltas: 0, ms: 700 } });

  beforeAll(async () => {
    slow = await startTestApp(
      { SLUICE_SSE_KEEPALIVE_MS: "200" },
      {
        models: registryWith([
          { name: "stall-mid", engine: stallMid },
          { name: "stall-first", engine: stallFirst },
        ]),
      },
    );
  });

  afterAll(async () => {
    await slow?.close();
  });

  it.each(["stall-mid", "stall-first"])(
    "an idle %s stream carries `: keep-alive` comments and still completes",
    async (model) => {
      const { apiKey } = await slow.newAccount({ rps: 1000, burst: 1000 });
      const reply = await postChat(slow, apiKey, { model, messages: CHAT_MESSAGES, stream: true });
      expect(reply.status).toBe(200);
      expect(reply.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(reply.text).toContain(": keep-alive\n\n");
      const frames = parseSse(reply.text);
      const comments = frames.filter((f) => f.comment);
      expect(comments.length).toBeGreaterThanOrEqual(2);
      for (const c of comments) expect(c.raw).toBe(": keep-alive");
      const chunks = chunksOf(frames);
      expect(streamedText(chunks.slice(0, -1))).toBe(model === "stall-mid" ? "abc" : "ab");
      expect(chunks[chunks.length - 1]?.usage?.completion_tokens).toBe(model === "stall-mid" ? 3 : 2);
      expect(frames[frames.length - 1]?.raw).toBe("data: [DONE]");
    },
  );
});
