import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineEvent } from "../engine.ts";
import type { Tokenizer } from "../tokenizer.ts";

const FINISH: Record<string, FinishReason> = {
  stop: FinishReason.STOP,
  length: FinishReason.LENGTH,
  tool_calls: FinishReason.TOOL_CALLS,
  function_call: FinishReason.TOOL_CALLS,
  content_filter: FinishReason.CONTENT_FILTER,
};

/** Thrown when the upstream stream breaks its own protocol (ends early, sends an error, bad JSON). */
export class UpstreamStreamError extends Error {
  override name = "UpstreamStreamError";
}

interface ChunkShape {
  error?: unknown;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  choices?: Array<{
    index?: number;
    delta?: { content?: string | null; tool_calls?: JsonValue[] };
    finish_reason?: string | null;
    logprobs?: { content?: JsonValue[] | null } | null;
  }>;
}

/**
 * Turns an OpenAI-compatible SSE body into engine events: a delta per content piece (counted
 * locally, for mid-call reservation), tool-call fragments as they come, then `done` with the
 * upstream's usage when it sent one (vLLM, OpenAI and llama.cpp do with include_usage).
 */
export async function* parseUpstreamStream(
  body: AsyncIterable<Uint8Array>,
  tokenizer: Tokenizer,
  maxChoices = 1,
): AsyncGenerator<EngineEvent> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => queue.push(event) });
  const decoder = new TextDecoder();
  // Per choice, by the index the upstream gives each choice (0 unless n > 1).
  const finish: Array<FinishReason | undefined> = [];
  const logprobs: JsonValue[][] = [];
  let usage: { promptTokens: number; completionTokens: number } | undefined;
  let seen = 0;
  let done = false;

  for await (const bytes of body) {
    parser.feed(decoder.decode(bytes, { stream: true }));
    while (queue.length > 0) {
      const event = queue.shift();
      if (!event || done) continue;
      if (event.data === "[DONE]") {
        done = true;
        continue;
      }
      let chunk: ChunkShape;
      try {
        chunk = JSON.parse(event.data) as ChunkShape;
      } catch {
        throw new UpstreamStreamError("the upstream sent a chunk that is not JSON");
      }
      if (chunk.error !== undefined) throw new UpstreamStreamError("the upstream reported an error mid-stream");
      if (
        chunk.usage &&
        typeof chunk.usage.prompt_tokens === "number" &&
        typeof chunk.usage.completion_tokens === "number"
      ) {
        usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens };
      }
      for (const choice of chunk.choices ?? []) {
        const index = choice.index ?? 0;
        if (!Number.isSafeInteger(index) || index < 0 || index >= maxChoices)
          throw new UpstreamStreamError("the upstream sent a choice that was not asked for");
        seen = Math.max(seen, index + 1);
        const text = choice.delta?.content ?? "";
        const toolCalls = choice.delta?.tool_calls;
        if (text || toolCalls?.length) {
          const counted = tokenizer.count(text) + (toolCalls ? tokenizer.count(JSON.stringify(toolCalls)) : 0);
          yield {
            type: "delta",
            text,
            tokens: Math.max(1, counted),
            ...(toolCalls?.length && { toolCalls }),
            ...(index > 0 && { choice: index }),
          };
        }
        if (choice.logprobs?.content) {
          logprobs[index] ??= [];
          logprobs[index].push(...choice.logprobs.content);
        }
        if (choice.finish_reason) finish[index] = FINISH[choice.finish_reason] ?? FinishReason.STOP;
      }
    }
  }
  // Every choice that was started must have finished; a stream cut short is a failure.
  const started = Math.max(1, finish.length, logprobs.length, seen);
  for (let i = 0; i < started; i++) {
    if (finish[i] === undefined && !done) throw new UpstreamStreamError("the upstream stream ended before it finished");
  }
  const choices = Array.from({ length: started }, (_, i) => {
    const lp: JsonObject | undefined = logprobs[i]?.length ? { content: logprobs[i] ?? [] } : undefined;
    return { finishReason: finish[i] ?? FinishReason.STOP, ...(lp && { logprobs: lp }) };
  });
  const [first] = choices;
  yield {
    type: "done",
    finishReason: first?.finishReason ?? FinishReason.STOP,
    ...(usage && { usage }),
    ...(first?.logprobs && { logprobs: first.logprobs }),
    ...(choices.length > 1 && { choices }),
  };
}
