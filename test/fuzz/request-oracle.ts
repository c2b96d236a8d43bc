import { fromBinary, fromJsonString, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  CreateChatCompletionRequestSchema,
  type ChatParams,
} from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import {
  depthOf,
  judgeCall,
  keyGate,
  KINDLESS,
  type CallModel,
  type FuzzReason,
  type KeyKind,
  type Outcome,
} from "./rules-oracle.ts";

/**
 * The fuzz oracle for reading a chat body: the OpenAI wire shape at the HTTP edge, and the
 * Connect JSON and binary encodings at the core. It judges bytes, never what a generator meant,
 * and returns the one outcome DESIGN's check order gives them.
 *
 * Decisions this oracle pins, where the documents leave room:
 * - the edge decodes the body as UTF-8 with U+FFFD for invalid sequences (as Node does), so
 *   invalid UTF-8 inside a JSON string is accepted and elsewhere is `invalid_json_body`, and a
 *   byte order mark is `invalid_json_body`; the core decodes as `TextDecoder` does (BOM dropped);
 * - a JSON body nesting deeper than 64 levels is `invalid_request_body` at the edge;
 * - on the core, JSON that does not parse is `invalid_json_body`, JSON that is not an object is
 *   `body_must_be_object`, and an object or binary message that is not a well-typed
 *   `CreateChatCompletionRequest` (wrong type, duplicate field, bad wire data) is
 *   `invalid_request_body`, all `INVALID_ARGUMENT`, as README's catalogue lists them.
 */

/** The maximum JSON nesting the edge accepts (src/edge/chat: MAX_JSON_DEPTH). */
export const MAX_JSON_DEPTH = 64;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const nullish = (v: unknown): v is null | undefined => v === undefined || v === null;

/** Whether a parsed JSON value holds only finite numbers (JSON.parse turns 1e400 into Infinity). */
function finiteJson(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "number" && !Number.isFinite(v)) return false;
    if (typeof v === "object" && v !== null) stack.push(...Object.values(v));
  }
  return true;
}

class Refused extends Error {}
const refuse = (): never => {
  throw new Refused();
};

const str = (v: unknown): string | undefined => (nullish(v) ? undefined : typeof v === "string" ? v : refuse());
const num = (v: unknown): number | undefined =>
  nullish(v) ? undefined : typeof v === "number" && Number.isFinite(v) ? v : refuse();
const bool = (v: unknown): boolean | undefined => (nullish(v) ? undefined : typeof v === "boolean" ? v : refuse());
const safeInt = (v: unknown, lo = Number.MIN_SAFE_INTEGER, hi = Number.MAX_SAFE_INTEGER): number | undefined =>
  nullish(v) ? undefined : typeof v === "number" && Number.isSafeInteger(v) && v >= lo && v <= hi ? v : refuse();
const jsonObject = (v: unknown): Record<string, unknown> => (isObject(v) && finiteJson(v) ? v : refuse());
const objects = (v: unknown): unknown[] => (nullish(v) ? [] : Array.isArray(v) ? v.map(jsonObject) : refuse());
/** SPEC: a max_tokens that is not a positive integer is no limit at all, never an error. */
const maxTokens = (v: unknown): bigint | undefined =>
  typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? BigInt(v) : undefined;

function content(v: unknown): string {
  if (nullish(v)) return "";
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) return refuse();
  return v
    .map((part) => (isObject(part) && part.type === "text" && typeof part.text === "string" ? part.text : refuse()))
    .join("\n");
}

function message(v: unknown): CallModel["messages"][number] {
  if (!isObject(v)) return refuse();
  const role = typeof v.role === "string" ? v.role : refuse();
  return {
    role,
    content: content(v.content),
    name: str(v.name),
    toolCallId: str(v.tool_call_id),
    toolCalls: objects(v.tool_calls),
  };
}

/** Translates an edge body (already known to be an object) the way the OpenAI API types it. */
export function edgeCall(b: Record<string, unknown>): CallModel | "invalid" {
  try {
    const prompt = nullish(b.prompt)
      ? undefined
      : Array.isArray(b.prompt)
        ? b.prompt.map((p) => str(p) ?? refuse()).join("\n")
        : str(b.prompt);
    const stop = nullish(b.stop)
      ? []
      : Array.isArray(b.stop)
        ? b.stop.map((s) => str(s) ?? refuse())
        : [str(b.stop) ?? refuse()];
    const toolChoice = nullish(b.tool_choice)
      ? undefined
      : typeof b.tool_choice === "string"
        ? b.tool_choice
        : jsonObject(b.tool_choice);
    return {
      model: str(b.model) ?? "",
      messages: nullish(b.messages) ? [] : Array.isArray(b.messages) ? b.messages.map(message) : refuse(),
      prompt,
      maxTokens: maxTokens(b.max_tokens) ?? maxTokens(b.max_completion_tokens),
      temperature: num(b.temperature),
      topP: num(b.top_p),
      presencePenalty: num(b.presence_penalty),
      frequencyPenalty: num(b.frequency_penalty),
      stop,
      seed: ((s) => (s === undefined ? undefined : BigInt(s)))(safeInt(b.seed)),
      user: str(b.user),
      n: safeInt(b.n, -(2 ** 31), 2 ** 31 - 1),
      tools: objects(b.tools),
      toolChoice,
      responseFormat: nullish(b.response_format) ? undefined : jsonObject(b.response_format),
      logprobs: bool(b.logprobs),
      topLogprobs: safeInt(b.top_logprobs, -(2 ** 31), 2 ** 31 - 1),
      stream: bool(b.stream) ?? false,
    };
  } catch (err) {
    if (err instanceof Refused) return "invalid";
    throw err;
  }
}

/** The outcome of `POST /v1/chat/completions` with this key and these body bytes. */
export function edgeChatOutcome(key: KeyKind, body: Uint8Array, declaredTooLarge = false): Outcome {
  const gate = keyGate(key, declaredTooLarge);
  if (gate) return gate;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString("utf8"));
  } catch {
    return { kind: "error", reason: "invalid_json_body" };
  }
  if (!isObject(parsed)) return { kind: "error", reason: "body_must_be_object" };
  if (depthOf(parsed, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) return judgeCall("invalid", key);
  return judgeCall(edgeCall(parsed), key);
}

/** The JSON of a `google.protobuf.Value`, or KINDLESS when it has none. */
function valueJson(v: NonNullable<ChatParams["toolChoice"]>): unknown {
  try {
    return toJson(ValueSchema, v);
  } catch {
    return KINDLESS;
  }
}

/** A decoded `ChatParams` in the rules' terms. */
export function callFromParams(p: ChatParams | undefined): CallModel {
  return {
    model: p?.model ?? "",
    messages: (p?.messages ?? []).map((m) => ({
      role: m.role,
      content: m.content,
      name: m.name,
      toolCallId: m.toolCallId,
      toolCalls: m.toolCalls,
    })),
    prompt: p?.prompt,
    maxTokens: p?.maxTokens,
    temperature: p?.temperature,
    topP: p?.topP,
    presencePenalty: p?.presencePenalty,
    frequencyPenalty: p?.frequencyPenalty,
    stop: p?.stop ?? [],
    seed: p?.seed,
    user: p?.user,
    n: p?.n,
    tools: p?.tools ?? [],
    toolChoice: p?.toolChoice ? valueJson(p.toolChoice) : undefined,
    responseFormat: p?.responseFormat,
    logprobs: p?.logprobs,
    topLogprobs: p?.topLogprobs,
    stream: false,
  };
}

/**
 * Decodes a Connect unary request body as the core must: the params, or the reason it is
 * refused (`invalid_json_body`, `body_must_be_object`, `invalid_request_body`).
 */
export function decodeConnect(
  format: "json" | "binary",
  body: Uint8Array,
): { params: ChatParams | undefined } | { refused: FuzzReason } {
  if (format === "binary") {
    try {
      return { params: fromBinary(CreateChatCompletionRequestSchema, body).params };
    } catch {
      return { refused: "invalid_request_body" };
    }
  }
  const text = new TextDecoder().decode(body);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { refused: "invalid_json_body" };
  }
  if (!isObject(parsed)) return { refused: "body_must_be_object" };
  try {
    return { params: fromJsonString(CreateChatCompletionRequestSchema, text, { ignoreUnknownFields: true }).params };
  } catch {
    return { refused: "invalid_request_body" };
  }
}

/** The outcome of a Connect unary `CreateChatCompletion` with this key, encoding and body. */
export function connectChatOutcome(key: KeyKind, format: "json" | "binary", body: Uint8Array): Outcome {
  const gate = keyGate(key);
  if (gate) return gate;
  const decoded = decodeConnect(format, body);
  if ("refused" in decoded) return { kind: "error", reason: decoded.refused };
  return judgeCall(callFromParams(decoded.params), key);
}

/** The outcome of `GET /v1/me`: only the key matters. */
export function meOutcome(key: KeyKind): Outcome {
  return keyGate(key) ?? { kind: "me", accountId: key === "unonboarded" ? "unonboarded" : "good" };
}
