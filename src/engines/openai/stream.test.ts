import { describe, expect, it } from "vitest";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineEvent } from "../engine.ts";
import { createTokenizer } from "../tokenizer.ts";
import { parseUpstreamStream, UpstreamStreamError } from "./stream.ts";

const tokenizer = createTokenizer();

/** An SSE body cut into awkward pieces, as a network delivers it. */
async function* body(frames: string[], pieceSize = 7): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(frames.map((f) => `data: ${f}\n\n`).join(""));
  for (let i = 0; i < bytes.length; i += pieceSize) yield bytes.slice(i, i + pieceSize);
}

async function collect(frames: string[]): Promise<EngineEvent[]> {
  const events: EngineEvent[] = [];
  for await (const e of parseUpstreamStream(body(frames), tokenizer)) events.push(e);
  return events;
}

const chunk = (choice: object, extra: object = {}) =>
  JSON.stringify({ id: "x", object: "chat.completion.chunk", choices: [choice], ...extra });

describe("parseUpstreamStream", () => {
  it("yields content deltas, then done with the upstream's usage and finish reason", async () => {
    const events = await collect([
      chunk({ index: 0, delta: { role: "assistant", content: "" } }),
      chunk({ index: 0, delta: { content: "Hello" } }),
      chunk({ index: 0, delta: { content: " world, héllo 🎉" } }),
      chunk({ index: 0, delta: {}, finish_reason: "length" }),
      JSON.stringify({ id: "x", choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } }),
      "[DONE]",
    ]);
    expect(events).toEqual([
      { type: "delta", text: "Hello", tokens: 1 },
      { type: "delta", text: " world, héllo 🎉", tokens: tokenizer.count(" world, héllo 🎉") },
      { type: "done", finishReason: FinishReason.LENGTH, usage: { promptTokens: 11, completionTokens: 2 } },
    ]);
  });

  it("passes tool-call fragments through and maps finish_reason tool_calls", async () => {
    const fragment = [
      { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"ci' } },
    ];
    const events = await collect([
      chunk({ index: 0, delta: { tool_calls: fragment } }),
      chunk({ index: 0, delta: {}, finish_reason: "tool_calls" }),
      "[DONE]",
    ]);
    expect(events[0]).toMatchObject({ type: "delta", text: "", toolCalls: fragment });
    expect(events[1]).toEqual({ type: "done", finishReason: FinishReason.TOOL_CALLS });
  });

  it("collects logprobs for a unary answer", async () => {
    const events = await collect([
      chunk({ index: 0, delta: { content: "a" }, logprobs: { content: [{ token: "a", logprob: -0.1 }] } }),
      chunk({ index: 0, delta: { content: "b" }, logprobs: { content: [{ token: "b", logprob: -0.2 }] } }),
      chunk({ index: 0, delta: {}, finish_reason: "stop" }),
      "[DONE]",
    ]);
    expect(events.at(-1)).toEqual({
      type: "done",
      finishReason: FinishReason.STOP,
      logprobs: {
        content: [
          { token: "a", logprob: -0.1 },
          { token: "b", logprob: -0.2 },
        ],
      },
    });
  });

  it("fails a stream that ends before finishing, sends an error, or sends bad JSON", async () => {
    await expect(collect([chunk({ index: 0, delta: { content: "half" } })])).rejects.toBeInstanceOf(
      UpstreamStreamError,
    );
    await expect(collect([JSON.stringify({ error: { message: "boom" } })])).rejects.toThrow(/error mid-stream/);
    await expect(collect(["{not json"])).rejects.toThrow(/not JSON/);
  });

  it("accepts a stream that finishes without [DONE]", async () => {
    const events = await collect([chunk({ index: 0, delta: { content: "x" }, finish_reason: "stop" })]);
    expect(events.at(-1)).toEqual({ type: "done", finishReason: FinishReason.STOP });
  });

  it("keeps interleaved choices apart, each with its own finish", async () => {
    const frames = [
      chunk({ index: 0, delta: { content: "a0" } }),
      chunk({ index: 1, delta: { content: "b0" } }),
      chunk({ index: 1, delta: {}, finish_reason: "length" }),
      chunk({ index: 0, delta: {}, finish_reason: "stop" }),
      "[DONE]",
    ];
    const events: EngineEvent[] = [];
    for await (const e of parseUpstreamStream(body(frames), tokenizer, 2)) events.push(e);
    expect(events).toEqual([
      { type: "delta", text: "a0", tokens: tokenizer.count("a0") },
      { type: "delta", text: "b0", tokens: tokenizer.count("b0"), choice: 1 },
      {
        type: "done",
        finishReason: FinishReason.STOP,
        choices: [{ finishReason: FinishReason.STOP }, { finishReason: FinishReason.LENGTH }],
      },
    ]);
  });

  it("refuses a choice index that was not asked for", async () => {
    const frames = [chunk({ index: 5, delta: { content: "x" } }), "[DONE]"];
    await expect(collect(frames)).rejects.toThrow(/not asked for/);
  });

  it("fails when a started choice never finishes and the stream ends without [DONE]", async () => {
    const frames = [
      chunk({ index: 0, delta: { content: "a" }, finish_reason: "stop" }),
      chunk({ index: 1, delta: { content: "half" } }),
    ];
    const run = async () => {
      for await (const _ of parseUpstreamStream(body(frames), tokenizer, 2)) {
        /* drain */
      }
    };
    await expect(run()).rejects.toBeInstanceOf(UpstreamStreamError);
  });
});
