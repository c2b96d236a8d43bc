import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { FinishReason } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { UpstreamHealth } from "../metrics.ts";

/** One turn of the conversation, as every engine sees it. */
export interface EngineMessage {
  role: string;
  content: string;
  name?: string;
  /** For a tool message: the tool call it answers. */
  toolCallId?: string;
  /** For an assistant message: the tool calls it made (OpenAI JSON shape). */
  toolCalls?: JsonObject[];
}

/**
 * What an engine is asked to do. The core has already validated and clamped every field,
 * so engines never re-check limits: they only honour them.
 */
export interface EngineRequest {
  /** The model name the caller asked for. */
  model: string;
  messages: EngineMessage[];
  /** Already clamped to 1..4096. */
  maxTokens: number;
  /** 0..2; undefined means the engine's default (1, as the OpenAI API). */
  temperature?: number;
  /** (0..1]; undefined means 1. */
  topP?: number;
  /** At most four strings; the answer is cut before the first occurrence of any. */
  stop: string[];
  seed?: bigint;
  presencePenalty?: number;
  frequencyPenalty?: number;
  user?: string;
  /** Tools, tool choice and response format in the OpenAI JSON shape; engines that cannot honour them ignore them. */
  tools?: JsonObject[];
  toolChoice?: JsonValue;
  responseFormat?: JsonObject;
  logprobs?: boolean;
  topLogprobs?: number;
  /** How many answers to generate (1..8; 1 when unset); their deltas carry `choice`. */
  n?: number;
  /** The call's request id, which an engine calling a server sends on as `x-request-id`. */
  requestId?: string;
  /** W3C trace headers (`traceparent`) naming the engine span, for an engine calling a server. */
  propagation?: Record<string, string>;
}

/** A piece of generated text and how many output tokens it holds. */
export interface EngineDelta {
  type: "delta";
  text: string;
  tokens: number;
  /** Partial tool calls (the OpenAI `delta.tool_calls` array), merged by their `index`. */
  toolCalls?: JsonValue[];
  /** The answer this piece belongs to, when n > 1 (0 when unset). */
  choice?: number;
  /**
   * True on the last delta of its choice, false when more follow, unset when the engine
   * cannot tell. It lets the edge put `finish_reason` on the last content chunk without
   * holding every delta on a timer.
   */
  last?: boolean;
}

/**
 * The end of a generation. `usage` is set when the engine knows the exact counts (an upstream
 * that reports them); otherwise the core counts the tokens itself.
 */
export interface EngineDone {
  type: "done";
  finishReason: FinishReason;
  usage?: { promptTokens: number; completionTokens: number };
  /** Log probabilities of the whole answer (OpenAI JSON shape), when asked for. */
  logprobs?: JsonObject;
  /** With n > 1: how each answer ended, by choice; `finishReason` and `logprobs` then describe choice 0. */
  choices?: Array<{ finishReason: FinishReason; logprobs?: JsonObject }>;
}

export type EngineEvent = EngineDelta | EngineDone;

/**
 * An engine turns a request into deltas. Cancelling `signal` must stop the work promptly: the
 * core relies on it to stop paying for a caller that went away.
 */
export interface Engine {
  generate(request: EngineRequest, signal: AbortSignal): AsyncIterable<EngineEvent>;
  /** Resolves when the engine can serve; rejects with the reason when it cannot. */
  ready(): Promise<void>;
  /** Releases connections and timers, when the engine holds any. */
  close?(): Promise<void>;
  /** The model servers behind the engine and their breakers, for the metrics; none for a built-in engine. */
  upstreams?(): UpstreamHealth[];
}
