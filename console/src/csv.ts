/**
 * Builds the usage CSV download in the browser, from records the usage RPCs returned. RFC 4180 shape:
 * a header row, CRLF line ends, and fields quoted only when they must be.
 */
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { formatDecimalUsd } from "./money.ts";

/**
 * The fields of a usage record the console shows. The holder's and the operator's RPCs return two message
 * types of this same shape, so components take this instead of either.
 */
export interface UsageRow {
  id: string;
  apiKeyId: string;
  model: string;
  promptTokens: bigint;
  completionTokens: bigint;
  costUsdMicros: bigint;
  createTime?: Timestamp | undefined;
}

/** The CSV columns, in order. */
export const USAGE_CSV_HEADER = [
  "id",
  "create_time",
  "model",
  "api_key_id",
  "prompt_tokens",
  "completion_tokens",
  "cost_usd_micros",
  "cost_usd",
] as const;

/** Quotes a field when it holds a comma, a quote or a line break, doubling inner quotes. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** A record's time as ISO 8601 UTC, or empty when the record has none. */
export function isoTime(time: Timestamp | undefined): string {
  return time ? timestampDate(time).toISOString() : "";
}

/** One CSV line per record after the header; an empty list still gets the header. */
export function usageCsv(rows: readonly UsageRow[]): string {
  const lines = [USAGE_CSV_HEADER.join(",")];
  for (const r of rows) {
    const fields = [
      r.id,
      isoTime(r.createTime),
      r.model,
      r.apiKeyId,
      r.promptTokens.toString(),
      r.completionTokens.toString(),
      r.costUsdMicros.toString(),
      formatDecimalUsd(r.costUsdMicros),
    ];
    lines.push(fields.map(csvField).join(","));
  }
  return `${lines.join("\r\n")}\r\n`;
}
