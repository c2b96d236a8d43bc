import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";

/**
 * The one error catalogue of Sluice. Every error that leaves the service, over gRPC or
 * HTTP, is built here from a stable reason, so that a code means the same condition
 * everywhere and no other module writes an error body by hand (AIP-193).
 */

/** The `google.rpc.ErrorInfo.domain` of every Sluice error. */
export const ERROR_DOMAIN = "sluice";

/**
 * How an HTTP caller sees an error: the bare `{detail}`, the structured `{error}` envelope, or
 * SPEC's plain-text 413 for a body above 32 MiB, which has no code.
 */
type Envelope =
  | { kind: "detail" }
  | { kind: "structured"; type: string; resolution: ConsolePage }
  | { kind: "plain"; text: string };

/**
 * The console page (under `/console/`) where the recovery of a structured error is done: its
 * `resolution_url`. The console serves each of these paths.
 */
export type ConsolePage = "billing" | "keys" | "status";

/** One catalogue row: how the error travels, and what its documentation page says. */
export interface Entry {
  readonly grpc: Code;
  readonly http: number;
  readonly envelope: Envelope;
  /** The default human message; it may change, so callers never branch on it. */
  readonly message: string;
  /** What condition raises it, for `/docs/errors/<code>`. */
  readonly cause: string;
  /** What the caller does about it, for `/docs/errors/<code>`. */
  readonly recovery: string;
  /** Whether it always carries a delay (`RetryInfo`; over HTTP `Retry-After` and `retry-after-ms`). */
  readonly retryAfter?: true;
}

const billing: Envelope = { kind: "structured", type: "billing_error", resolution: "billing" };

/** Every reason Sluice emits, with its gRPC code, HTTP status and envelope. */
export const CATALOGUE = {
  invalid_json_body: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request body is not valid JSON.",
    cause: "The body could not be parsed as JSON.",
    recovery: "Send a JSON object with `Content-Type: application/json`.",
  },
  body_must_be_object: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request body must be a JSON object.",
    cause: "The body parsed, but is not a JSON object.",
    recovery: 'Send one JSON object, such as `{"model": ..., "messages": [...]}`.',
  },
  invalid_request_body: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request failed validation.",
    cause: "The body is a JSON object, but a field is missing or has the wrong type or range.",
    recovery: "Fix the request; over gRPC, `ErrorInfo.metadata.field` names the field.",
  },
  missing_bearer_token: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "Send an API key as 'Authorization: Bearer <key>'.",
    cause: "No `Authorization: Bearer ...` header.",
    recovery: "Send your API key as `Authorization: Bearer svc_sk_...`.",
  },
  invalid_api_key: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "The API key is not found, malformed or revoked.",
    cause: "Key not found, malformed, revoked or expired, or an old secret of a rotated key past its grace period.",
    recovery:
      "Check the key. The console lists your keys with their expiry and, after a rotation, how long the old " +
      "secret still works; an operator issues new keys and secrets.",
  },
  onboarding_incomplete: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing,
    message: "Finish onboarding and set a spend cap in the console.",
    cause: "No spend cap set, or onboarding not finished.",
    recovery: "Finish onboarding in the console: an operator sets the spend cap and marks onboarding complete.",
  },
  spend_cap_exceeded: {
    grpc: Code.ResourceExhausted,
    http: 402,
    envelope: billing,
    retryAfter: true,
    message: "The call would exceed the monthly spend cap. Raise the cap or wait for the next period.",
    cause:
      "The call would exceed the monthly cap (the account's, or the calling key's own cap), or other calls in " +
      "flight hold what is left of it.",
    recovery:
      "When `ErrorInfo.metadata.temporary` is `true`, only other calls in flight stand in the way: retry after " +
      "the short delay given (`Retry-After`, `retry-after-ms`, `RetryInfo`: at least 1 s, at most the reservation " +
      "TTL), when their holds have ended. Otherwise (`false`) the month's spend is used up: raise the cap or wait " +
      "for the period rollover; `Retry-After` is the number of seconds until the next period. " +
      "`ErrorInfo.metadata.cap` says which cap refused: `account`, or `key` (the key's own cap, which an operator " +
      "raises or removes; another key of the account may still have room).",
  },
  payment_failed: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing,
    message: "The last invoice failed to charge. Update the payment method in the console.",
    cause: "The last invoice failed to charge.",
    recovery: "Update the payment method in the console.",
  },
  subscription_canceled: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing,
    message: "The subscription has been cancelled. Resubscribe in the console.",
    cause: "The subscription has been cancelled.",
    recovery: "Resubscribe in the console.",
  },
  upstream_bad_request: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The model server refused the request as invalid.",
    cause: "The model server refused the request as invalid.",
    recovery: "Check the request against the model's limits. The call was not billed.",
  },
  model_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The model does not exist.",
    cause: "The model named in the request is not served.",
    recovery: "Use a model from `GET /v1/models`.",
  },
  request_too_large: {
    grpc: Code.ResourceExhausted,
    http: 413,
    envelope: { kind: "plain", text: "Request body too large\n" },
    message: "The request is above 32 MiB.",
    cause: "Request body above 32 MB (33,554,432 bytes).",
    recovery: "Send a smaller body. Over HTTP this 413 is plain text, with no code.",
  },
  input_too_large: {
    grpc: Code.InvalidArgument,
    http: 413,
    envelope: { kind: "structured", type: "invalid_request_error", resolution: "keys" },
    message: "The chat input is above 32,768 tokens.",
    cause: "Chat input above 32,768 tokens.",
    recovery: "Shorten the messages and tool definitions.",
  },
  api_key_rate_limited: {
    grpc: Code.ResourceExhausted,
    http: 429,
    envelope: { kind: "structured", type: "rate_limit_error", resolution: "keys" },
    retryAfter: true,
    message: "The API key's request rate limit is exhausted. Retry after the delay given.",
    cause: "Per-key request limit exhausted, or the key's tokens-per-minute budget cannot cover the call yet.",
    recovery:
      "`Retry-After` (seconds) and `retry-after-ms` (milliseconds) are always present; honor them. The console " +
      "shows each key's rate, burst and token limit. A token refusal (`ErrorInfo.metadata.limit` `tokens`) counts " +
      "the call's prompt plus its max_tokens: asking for fewer tokens may fit sooner; `x-ratelimit-remaining-tokens` " +
      "says what is left.",
  },
  service_unavailable: {
    grpc: Code.Unavailable,
    http: 503,
    envelope: { kind: "structured", type: "service_unavailable", resolution: "status" },
    retryAfter: true,
    message: "The service is temporarily unavailable. Back off and retry.",
    cause: "Service temporarily unavailable: the store, the model servers or this process are overloaded or down.",
    recovery:
      "`Retry-After` and `retry-after-ms` are present; back off and retry. The console's status page shows " +
      "whether the service is ready.",
  },
  canceled: {
    grpc: Code.Canceled,
    http: 499,
    envelope: { kind: "detail" },
    message: "The caller went away or stopped reading; the call was not billed.",
    cause: "The caller went away, or stopped reading, before the answer was complete.",
    recovery: "Nothing to do: the call was not billed. No caller receives it; logs and metrics show it as 499.",
  },
  internal_error: {
    grpc: Code.Internal,
    http: 500,
    envelope: { kind: "structured", type: "api_error", resolution: "status" },
    message: "An internal error occurred.",
    cause:
      "An internal error occurred. With `ErrorInfo.metadata.billing` = `unknown`, the store did not " +
      "confirm whether the call was billed.",
    recovery: "Retry later. An operator finds a call's outcome by its `completion_id` in the usage records.",
  },
  admin_disabled: {
    grpc: Code.PermissionDenied,
    http: 403,
    envelope: { kind: "detail" },
    message: "The Admin API is off: SLUICE_ADMIN_TOKEN is not set.",
    cause: "The Admin API is off because `SLUICE_ADMIN_TOKEN` is not set.",
    recovery: "Start Sluice with `SLUICE_ADMIN_TOKEN` set.",
  },
  invalid_admin_token: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "The admin token is missing or wrong.",
    cause: "The admin token is missing or wrong.",
    recovery: "Send `Authorization: Bearer <SLUICE_ADMIN_TOKEN>`.",
  },
  account_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The account does not exist.",
    cause: "No account has that id.",
    recovery: "Find the account by id or email in the console's operator view.",
  },
  api_key_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The API key does not exist.",
    cause: "No API key has that id.",
    recovery: "List the account's keys to find the id.",
  },
  webhook_endpoint_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The webhook endpoint does not exist.",
    cause: "No webhook endpoint has that id.",
    recovery: "List the webhook endpoints to find the id.",
  },
  not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "No such route.",
    cause: "No route has that path.",
    recovery: "See the README for the routes: `/v1/chat/completions`, `/v1/models`, `/v1/me`.",
  },
  method_not_allowed: {
    grpc: Code.Unimplemented,
    http: 405,
    envelope: { kind: "detail" },
    message: "The route does not take this method.",
    cause: "The route exists but does not take this HTTP method.",
    recovery: "Use a method from the `Allow` header.",
  },
  invalid_argument: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request has an invalid field.",
    cause: "A field of an RPC's request is invalid.",
    recovery: "Fix the field named in `ErrorInfo.metadata.field`.",
  },
} as const satisfies Record<string, Entry>;

/** A stable error reason: clients branch on it, never on the message. */
export type Reason = keyof typeof CATALOGUE;

/** Options of one error occurrence. */
export interface ErrorOptions {
  /** Replaces the catalogue's human message; never carries secrets. */
  message?: string;
  /** When the caller may retry, in milliseconds; adds `google.rpc.RetryInfo`. */
  retryAfterMs?: number;
  /** Extra `ErrorInfo.metadata`, such as the offending field. */
  metadata?: Record<string, string>;
  /** Response headers to carry with the error (rate-limit state, request id). */
  headers?: Record<string, string>;
  cause?: unknown;
}

/** Builds the `ConnectError` for a reason: one `ErrorInfo`, plus `RetryInfo` when there is a delay. */
export function sluiceError(reason: Reason, options: ErrorOptions = {}): ConnectError {
  const entry: Entry = CATALOGUE[reason];
  const details = [
    {
      desc: ErrorInfoSchema,
      value: create(ErrorInfoSchema, { reason, domain: ERROR_DOMAIN, metadata: options.metadata ?? {} }),
    },
  ];
  const err = new ConnectError(options.message ?? entry.message, entry.grpc, options.headers, details, options.cause);
  if (options.retryAfterMs !== undefined) {
    const ms = Math.max(0, Math.ceil(options.retryAfterMs));
    const retry = create(RetryInfoSchema, {
      retryDelay: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 },
    });
    err.details.push({ desc: RetryInfoSchema, value: retry });
  }
  return err;
}

/** The catalogue reason of an error, if it is a Sluice error. */
export function reasonOf(err: unknown): Reason | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  for (const info of err.findDetails(ErrorInfoSchema)) {
    if (info.domain === ERROR_DOMAIN && Object.hasOwn(CATALOGUE, info.reason)) return info.reason as Reason;
  }
  return undefined;
}

/** The retry delay of an error in milliseconds, if it carries `RetryInfo`. */
export function retryAfterMsOf(err: unknown): number | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const [info] = err.findDetails(RetryInfoSchema);
  if (!info?.retryDelay) return undefined;
  return Number(info.retryDelay.seconds) * 1000 + Math.ceil(info.retryDelay.nanos / 1_000_000);
}

/** The HTTP status of a reason. */
export function httpStatusOf(reason: Reason): number {
  return CATALOGUE[reason].http;
}

/**
 * The retry delay of a `service_unavailable` that has no better one of its own (an engine or a
 * transport that failed without saying when to come back), so that every 503 carries a delay on
 * every protocol: `RetryInfo` over gRPC and Connect, `Retry-After` over HTTP.
 */
export const UNAVAILABLE_RETRY_MS = 1000;

/** The `data:` payload of the internal-error event of a stream, fixed by SPEC. */
export const STREAM_INTERNAL_ERROR = { error: "service_unavailable", status: 500 } as const;

/**
 * `ErrorInfo.metadata` of an error after which nobody can yet say whether the call was billed:
 * its settle was sent, and the store has not answered since. The caller must not be told "not
 * billed"; an operator finds the outcome by completion id (`completion_id`).
 */
export const BILLING_UNKNOWN = { billing: "unknown" } as const;

/** The error for a call whose billing outcome could not be resolved (see `BILLING_UNKNOWN`). */
export function billingUnknownError(completionId: string): ConnectError {
  return sluiceError("internal_error", {
    message: "The store did not answer: whether this call was billed is not known yet. Look it up by completion id.",
    metadata: { ...BILLING_UNKNOWN, completion_id: completionId },
  });
}

/** Whether an error says the call's billing outcome is unknown (see `BILLING_UNKNOWN`). */
export function isBillingUnknown(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  return err
    .findDetails(ErrorInfoSchema)
    .some((i) => i.domain === ERROR_DOMAIN && i.metadata.billing === BILLING_UNKNOWN.billing);
}

/** Looks up a reason by name, for mapping foreign (HTTP) errors back into the catalogue. */
export function isReason(value: unknown): value is Reason {
  return typeof value === "string" && Object.hasOwn(CATALOGUE, value);
}
