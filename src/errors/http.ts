import { Code, ConnectError } from "@connectrpc/connect";
import { httpStatusOf, reasonOf, retryAfterMsOf, sluiceError, type Reason, UNAVAILABLE_RETRY_MS } from "./catalogue.ts";
import { errorBody, type ErrorLinks } from "./envelope.ts";

/**
 * The one mapping between gRPC errors and HTTP responses, in both directions, driven by the
 * catalogue table, so the edge never decides a status or a body on its own.
 */

/** An HTTP error response, ready for the edge to write. */
export interface HttpError {
  status: number;
  headers: Record<string, string>;
  /** A JSON value, or a string for the plain 413. */
  body: object | string;
  reason: Reason | undefined;
}

/** Response headers of a core error that an HTTP caller must see. */
const FORWARDED = /^(x-ratelimit-|x-request-id$)/;

/**
 * The first of a header's values. Connect merges a stream's response headers into its error
 * metadata, so a header set on both arrives joined ("9, 9"); these headers are single-valued.
 */
export function firstValue(value: string): string {
  return value.split(",")[0]?.trim() ?? value;
}

/** The reason to use for a ConnectError that carries none (a bug, a transport failure). */
function fallbackReason(err: ConnectError): Reason {
  switch (err.code) {
    case Code.Unavailable:
    case Code.DeadlineExceeded:
    case Code.Aborted:
      return "service_unavailable";
    default:
      return "internal_error";
  }
}

/**
 * The HTTP headers of a retry delay: `Retry-After` in whole seconds, rounded up and at least 1
 * (RFC 9110 has no fractions), and `retry-after-ms`, the exact delay in integer milliseconds,
 * which the official OpenAI SDKs read before `Retry-After` when they retry a 429 or a 5xx.
 * Every response that carries a delay carries both, built here, so the two always agree. That
 * includes a 402 `spend_cap_exceeded`: SDKs do not retry a 402, but a caller who does retries
 * at the exact time of a temporary refusal (and one header rule is simpler than two).
 */
export function retryHeaders(retryAfterMs: number): Record<string, string> {
  const ms = Math.max(0, Math.ceil(retryAfterMs));
  return { "retry-after": String(Math.max(1, Math.ceil(ms / 1000))), "retry-after-ms": String(ms) };
}

/** Maps any error thrown by the core into the HTTP status, envelope and headers of SPEC. */
export function toHttpError(thrown: unknown, links: ErrorLinks): HttpError {
  const err = ConnectError.from(thrown);
  // A message over the core's read limit (a split deployment's gRPC hop) is a body too large.
  if (err.code === Code.ResourceExhausted && reasonOf(err) === undefined) return bodyTooLarge();
  const reason = reasonOf(err) ?? fallbackReason(err);
  const headers: Record<string, string> = {};
  err.metadata.forEach((value, key) => {
    if (FORWARDED.test(key)) headers[key] = firstValue(value);
  });
  let retryMs = retryAfterMsOf(err);
  if (retryMs === undefined && reason === "service_unavailable") retryMs = UNAVAILABLE_RETRY_MS;
  if (retryMs !== undefined) Object.assign(headers, retryHeaders(retryMs));
  // The message of an unexpected error may hold internals; only catalogue messages leave.
  const message = reasonOf(err) ? err.rawMessage : undefined;
  return { status: httpStatusOf(reason), headers, body: errorBody(reason, links, message), reason };
}

/** The plain 413 for a body above 32 MiB: SPEC gives it no code and no envelope. */
export function bodyTooLarge(): HttpError {
  return {
    status: 413,
    headers: {},
    body: errorBody("request_too_large", { publicUrl: "" }),
    reason: "request_too_large",
  };
}

/** Builds the HTTP error for a reason raised by the edge itself (body parsing, bearer check). */
export function httpErrorFor(reason: Reason, links: ErrorLinks): HttpError {
  return toHttpError(sluiceError(reason), links);
}
