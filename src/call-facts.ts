import type { Attributes, Span } from "@opentelemetry/api";

/**
 * What one request learns about itself as it runs (who called, which model, what it used and
 * cost, when its first token came), gathered so that its one access line, its metrics and its
 * span say the same thing at its end. The edge keeps one per HTTP request, the core one per
 * RPC; each fills in what it knows.
 */
export interface CallFacts {
  /** `performance.now()` when the request began. */
  readonly startedAt: number;
  accountId?: string;
  apiKeyId?: string;
  model?: string;
  promptTokens?: number;
  completionTokens?: number;
  /** What the call was billed, in micro-dollars. */
  costUsdMicros?: number;
  /** Milliseconds from the start to the first generated token. */
  ttftMs?: number;
  /** The OpenAI names of the choices' finish reasons ("stop", "length"...). */
  finishReasons?: string[];
  /** The completion id (`chatcmpl-...`). */
  responseId?: string;
  /** The request's span, parent of the next hop's; undefined when tracing is off. */
  span?: Span;
}

/** Starts the facts of a request beginning now. */
export const startFacts = (): CallFacts => ({ startedAt: performance.now() });

/** Records the first token's time once. */
export function markFirstToken(facts: CallFacts): void {
  facts.ttftMs ??= performance.now() - facts.startedAt;
}

/**
 * The access-line fields of `facts`: ids, never a secret; only the fields that are known, so a
 * refused call's line stays short.
 */
export function accessFields(facts: CallFacts): Record<string, string | number | string[]> {
  const out: Record<string, string | number | string[]> = {};
  if (facts.accountId) out.accountId = facts.accountId;
  if (facts.apiKeyId) out.apiKeyId = facts.apiKeyId;
  if (facts.model) out.model = facts.model;
  if (facts.promptTokens !== undefined) out.promptTokens = facts.promptTokens;
  if (facts.completionTokens !== undefined) out.completionTokens = facts.completionTokens;
  if (facts.costUsdMicros !== undefined) out.costUsdMicros = facts.costUsdMicros;
  if (facts.ttftMs !== undefined) out.ttftMs = Math.round(facts.ttftMs * 10) / 10;
  return out;
}

/** The OpenTelemetry GenAI attributes `facts` supports (semantic conventions for GenAI spans). */
export function genAiAttributes(facts: CallFacts): Attributes {
  const out: Attributes = {};
  if (facts.model === undefined) return out;
  out["gen_ai.operation.name"] = "chat";
  out["gen_ai.request.model"] = facts.model;
  if (facts.promptTokens !== undefined) out["gen_ai.usage.input_tokens"] = facts.promptTokens;
  if (facts.completionTokens !== undefined) out["gen_ai.usage.output_tokens"] = facts.completionTokens;
  if (facts.finishReasons?.length) out["gen_ai.response.finish_reasons"] = facts.finishReasons;
  if (facts.responseId) out["gen_ai.response.id"] = facts.responseId;
  return out;
}
