import type { EngineMessage } from "../../src/engines/engine.ts";
import { createTokenizer } from "../../src/engines/tokenizer.ts";

/**
 * The fuzz oracle for the rules the core applies to every chat call, written from the contract
 * (SPEC, DESIGN's check order, README's catalogue and the documented OpenAI ranges) rather than
 * from the code under test, so that a generated input's one right answer can be computed.
 */

/** A catalogue reason a fuzz case can be answered with. */
export type FuzzReason =
  | "invalid_json_body"
  | "body_must_be_object"
  | "invalid_request_body"
  | "missing_bearer_token"
  | "invalid_api_key"
  | "api_key_rate_limited"
  | "onboarding_incomplete"
  | "model_not_found"
  | "input_too_large"
  | "not_found"
  | "method_not_allowed";

/** README's catalogue, restated here so the fuzzer checks the implementation's table too. */
export const CATALOGUE_ROWS: Record<
  FuzzReason,
  { http: number; connect: string; envelope: "detail" | { type: string } }
> = {
  invalid_json_body: { http: 400, connect: "invalid_argument", envelope: "detail" },
  body_must_be_object: { http: 400, connect: "invalid_argument", envelope: "detail" },
  invalid_request_body: { http: 400, connect: "invalid_argument", envelope: "detail" },
  missing_bearer_token: { http: 401, connect: "unauthenticated", envelope: "detail" },
  invalid_api_key: { http: 401, connect: "unauthenticated", envelope: "detail" },
  api_key_rate_limited: { http: 429, connect: "resource_exhausted", envelope: { type: "rate_limit_error" } },
  onboarding_incomplete: { http: 402, connect: "failed_precondition", envelope: { type: "billing_error" } },
  model_not_found: { http: 404, connect: "not_found", envelope: "detail" },
  input_too_large: { http: 413, connect: "invalid_argument", envelope: { type: "invalid_request_error" } },
  not_found: { http: 404, connect: "not_found", envelope: "detail" },
  method_not_allowed: { http: 405, connect: "unimplemented", envelope: "detail" },
};

/** The keys a case can present; each has one documented place in the check order. */
export type KeyKind =
  | "good"
  | "missing"
  | "not-bearer"
  | "malformed"
  | "unknown"
  | "revoked"
  | "limited"
  | "unonboarded";

/** A chat call after translation, in the core's terms: what the rules below judge. */
export interface CallModel {
  model: string;
  messages: Array<{
    role: string;
    content: string;
    name?: string | undefined;
    toolCallId?: string | undefined;
    toolCalls: unknown[];
  }>;
  prompt?: string | undefined;
  maxTokens?: bigint | undefined;
  temperature?: number | undefined;
  topP?: number | undefined;
  presencePenalty?: number | undefined;
  frequencyPenalty?: number | undefined;
  stop: string[];
  seed?: bigint | undefined;
  user?: string | undefined;
  n?: number | undefined;
  tools: unknown[];
  /** The JSON of `tool_choice`, or `KINDLESS` for a protobuf Value with no kind (or NaN). */
  toolChoice?: unknown;
  responseFormat?: unknown;
  logprobs?: boolean | undefined;
  topLogprobs?: number | undefined;
  stream: boolean;
}

/** Marks a `google.protobuf.Value` that has no JSON form (no kind set, or a non-finite number). */
export const KINDLESS = Symbol("kindless value");

/** What the service must answer, before it is rendered for a protocol. */
export type Outcome =
  | { kind: "error"; reason: FuzzReason }
  | { kind: "plain-413" }
  | { kind: "ok"; stream: boolean; n: number; maxTokens: number; promptTokens: readonly [number, number] }
  | { kind: "me"; accountId: "good" | "unonboarded" };

/** SPEC: the model of a request that names none (or names ""). */
export const DEFAULT_MODEL = "service-extract";
/** SPEC: input above this many tokens is 413 `input_too_large`. */
export const MAX_INPUT_TOKENS = 32_768;
/** SPEC: a higher, missing, zero or non-integer max_tokens is treated as this. */
export const MAX_TOKENS_CEILING = 4096;
/** The deepest JSON a Struct or Value field may hold (tools, tool calls, tool_choice, response_format). */
export const MAX_STRUCT_DEPTH = 32;
const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);

/** Zod (and so the core) measures string lengths in code points; a lone surrogate is one. */
export function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const structOk = (v: unknown) => isObject(v) && depthOf(v, MAX_STRUCT_DEPTH) <= MAX_STRUCT_DEPTH;
const within = (v: number | undefined, lo: number, hi: number) =>
  v === undefined || (Number.isFinite(v) && v >= lo && v <= hi);
const intWithin = (v: number | undefined, lo: number, hi: number) =>
  v === undefined || (Number.isInteger(v) && v >= lo && v <= hi);
const lengthWithin = (s: string | undefined, lo: number, hi: number) =>
  s === undefined || (codePoints(s) >= lo && codePoints(s) <= hi);

/** DESIGN step 5's field rules: ranges of the OpenAI API, refused rather than clamped (except max_tokens). */
export function callIsValid(c: CallModel): boolean {
  if (codePoints(c.model) > 256) return false;
  if (c.messages.length > 100_000) return false;
  for (const m of c.messages) {
    if (!ROLES.has(m.role)) return false;
    if (!lengthWithin(m.name, 1, 256) || !lengthWithin(m.toolCallId, 1, 256)) return false;
    if (m.toolCalls.length > 128 || !m.toolCalls.every(structOk)) return false;
  }
  if (!within(c.temperature, 0, 2) || !within(c.topP, 0, 1)) return false;
  if (!within(c.presencePenalty, -2, 2) || !within(c.frequencyPenalty, -2, 2)) return false;
  if (c.stop.length > 4 || c.stop.some((s) => codePoints(s) < 1)) return false;
  if (!lengthWithin(c.user, 0, 512)) return false;
  if (!intWithin(c.n, 1, 8) || !intWithin(c.topLogprobs, 0, 20)) return false;
  if (c.tools.length > 128 || !c.tools.every(structOk)) return false;
  if (c.toolChoice !== undefined && typeof c.toolChoice !== "string" && !structOk(c.toolChoice)) return false;
  if (c.responseFormat !== undefined && !structOk(c.responseFormat)) return false;
  if (c.messages.length === 0 && c.prompt === undefined) return false;
  if (c.messages.length > 0 && c.prompt !== undefined) return false;
  return true;
}

const tokenizer = createTokenizer();

/**
 * Bounds on the prompt tokens of a valid call, as OpenAI counts them: 3 per reply, 3 per
 * message (plus 1 with a name), then the texts and the JSON of tools and tool calls. A text
 * is at least one token when not empty and at most one token per UTF-8 byte. Only when these
 * bounds straddle the 32,768 limit is the o200k_base count itself needed.
 */
export function promptTokenBounds(c: CallModel): { low: number; high: number; exact: () => number | undefined } {
  const messages = c.prompt === undefined ? c.messages : [{ role: "user", content: c.prompt, toolCalls: [] }];
  const extras = [
    c.tools.length > 0 ? c.tools : undefined,
    c.toolChoice,
    c.responseFormat,
    ...messages.map((m) => (m.toolCalls.length > 0 ? m.toolCalls : undefined)),
  ]
    .filter((e) => e !== undefined)
    .map((e) => JSON.stringify(e));
  const texts: string[] = [];
  let framing = 3;
  for (const m of messages) {
    framing += 3 + (m.name !== undefined ? 1 : 0);
    texts.push(m.content);
    if (m.name !== undefined) texts.push(m.name);
    if (m.toolCallId !== undefined) texts.push(m.toolCallId);
  }
  texts.push(...extras);
  let low = framing;
  let high = framing;
  for (const t of texts) {
    if (t.length > 0) low += 1;
    high += Buffer.byteLength(t, "utf8");
  }
  const exact = () =>
    tokenizer.countMessages(
      messages.map(
        (m): EngineMessage => ({
          role: m.role,
          content: m.content,
          ...(m.name !== undefined && { name: m.name }),
          ...(m.toolCallId !== undefined && { toolCallId: m.toolCallId }),
        }),
      ),
      MAX_INPUT_TOKENS,
      extras,
    );
  return { low, high, exact };
}

/**
 * The outcome of a translated call for a key that passed authentication and the rate limit,
 * in DESIGN's order: validation (400), account (402), model (404), input size (413), success.
 */
export function judgeCall(c: CallModel | "invalid", key: KeyKind): Outcome {
  if (c === "invalid" || !callIsValid(c)) return { kind: "error", reason: "invalid_request_body" };
  if (key === "unonboarded") return { kind: "error", reason: "onboarding_incomplete" };
  const model = c.model === "" ? DEFAULT_MODEL : c.model;
  if (model !== DEFAULT_MODEL) return { kind: "error", reason: "model_not_found" };
  const bounds = promptTokenBounds(c);
  let range: readonly [number, number] = [bounds.low, bounds.high];
  if (bounds.low > MAX_INPUT_TOKENS) return { kind: "error", reason: "input_too_large" };
  if (bounds.high > MAX_INPUT_TOKENS) {
    const exact = bounds.exact();
    if (exact === undefined) return { kind: "error", reason: "input_too_large" };
    range = [exact, exact];
  }
  const max =
    c.maxTokens === undefined || c.maxTokens <= 0n || c.maxTokens > BigInt(MAX_TOKENS_CEILING)
      ? MAX_TOKENS_CEILING
      : Number(c.maxTokens);
  return { kind: "ok", stream: c.stream, n: c.n ?? 1, maxTokens: max, promptTokens: range };
}

/**
 * DESIGN steps 1, 3 and 4 for a key: the outcome when the key alone decides the answer, or
 * undefined when the call goes on to the body. `declaredTooLarge` is step 2 (edge only).
 */
export function keyGate(key: KeyKind, declaredTooLarge = false): Outcome | undefined {
  if (key === "missing" || key === "not-bearer") return { kind: "error", reason: "missing_bearer_token" };
  if (declaredTooLarge) return { kind: "plain-413" };
  if (key === "malformed" || key === "unknown" || key === "revoked")
    return { kind: "error", reason: "invalid_api_key" };
  if (key === "limited") return { kind: "error", reason: "api_key_rate_limited" };
  return undefined;
}

/** How deeply a JSON value nests (an object or array is one level), without recursion. */
export function depthOf(value: unknown, stopAbove = Number.POSITIVE_INFINITY): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (typeof v !== "object" || v === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > stopAbove) return deepest;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}
