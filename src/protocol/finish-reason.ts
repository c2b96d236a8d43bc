import { FinishReason } from "../../gen/sluice/completion/v1/completion_service_pb.ts";

/**
 * The OpenAI names of the core's finish reasons, one table for the edge (a choice's
 * `finish_reason`) and for the logs, metrics and spans of both sides (GenAI's
 * `gen_ai.response.finish_reasons`), so the two can never name a reason differently.
 */
const FINISH: Record<FinishReason, string | null> = {
  [FinishReason.UNSPECIFIED]: null,
  [FinishReason.STOP]: "stop",
  [FinishReason.LENGTH]: "length",
  [FinishReason.TOOL_CALLS]: "tool_calls",
  [FinishReason.CONTENT_FILTER]: "content_filter",
};

/** The OpenAI `finish_reason` of a finish event; null when the core gave none. */
export const finishOf = (reason: FinishReason): string | null => FINISH[reason] ?? null;

/** How an access line, a metric or a span names a finish reason: its OpenAI name, or "unknown". */
export const finishName = (reason: FinishReason): string => finishOf(reason) ?? "unknown";
