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
  | { kind: "structured"; type: string; resolution: string }
  | { kind: "plain"; text: string };

interface Entry {
  readonly grpc: Code;
  readonly http: number;
  readonly envelope: Envelope;
  readonly message: string;
}

const billing = (resolution: string): Envelope => ({ kind: "structured", type: "billing_error", resolution });

/** Every reason Sluice emits, with its gRPC code, HTTP status and envelope. */
export const CATALOGUE = {
  invalid_json_body: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request body is not valid JSON.",
  },
  body_must_be_object: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request body must be a JSON object.",
  },
  invalid_request_body: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request failed validation.",
  },
  missing_bearer_token: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "Send an API key as 'Authorization: Bearer <key>'.",
  },
  invalid_api_key: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "The API key is not found, malformed or revoked.",
  },
  onboarding_incomplete: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing("onboarding"),
    message: "Finish onboarding and set a spend cap in the console.",
  },
  spend_cap_exceeded: {
    grpc: Code.ResourceExhausted,
    http: 402,
    envelope: billing("billing/cap"),
    message: "The call would exceed the monthly spend cap. Raise the cap or wait for the next period.",
  },
  payment_failed: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing("billing/payment-method"),
    message: "The last invoice failed to charge. Update the payment method in the console.",
  },
  subscription_canceled: {
    grpc: Code.FailedPrecondition,
    http: 402,
    envelope: billing("billing/subscription"),
    message: "The subscription has been cancelled. Resubscribe in the console.",
  },
  upstream_bad_request: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The model server refused the request as invalid.",
  },
  model_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The model does not exist.",
  },
  request_too_large: {
    grpc: Code.ResourceExhausted,
    http: 413,
    envelope: { kind: "plain", text: "Request body too large\n" },
    message: "The request is above 32 MiB.",
  },
  input_too_large: {
    grpc: Code.InvalidArgument,
    http: 413,
    envelope: { kind: "structured", type: "invalid_request_error", resolution: "limits" },
    message: "The chat input is above 32,768 tokens.",
  },
  api_key_rate_limited: {
    grpc: Code.ResourceExhausted,
    http: 429,
    envelope: { kind: "structured", type: "rate_limit_error", resolution: "limits" },
    message: "The API key's request rate limit is exhausted. Retry after the delay given.",
  },
  service_unavailable: {
    grpc: Code.Unavailable,
    http: 503,
    envelope: { kind: "structured", type: "service_unavailable", resolution: "status" },
    message: "The service is temporarily unavailable. Back off and retry.",
  },
  canceled: {
    grpc: Code.Canceled,
    http: 499,
    envelope: { kind: "detail" },
    message: "The caller went away or stopped reading; the call was not billed.",
  },
  internal_error: {
    grpc: Code.Internal,
    http: 500,
    envelope: { kind: "structured", type: "api_error", resolution: "status" },
    message: "An internal error occurred.",
  },
  admin_disabled: {
    grpc: Code.PermissionDenied,
    http: 403,
    envelope: { kind: "detail" },
    message: "The Admin API is off: SLUICE_ADMIN_TOKEN is not set.",
  },
  invalid_admin_token: {
    grpc: Code.Unauthenticated,
    http: 401,
    envelope: { kind: "detail" },
    message: "The admin token is missing or wrong.",
  },
  account_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The account does not exist.",
  },
  api_key_not_found: {
    grpc: Code.NotFound,
    http: 404,
    envelope: { kind: "detail" },
    message: "The API key does not exist.",
  },
  not_found: { grpc: Code.NotFound, http: 404, envelope: { kind: "detail" }, message: "No such route." },
  method_not_allowed: {
    grpc: Code.Unimplemented,
    http: 405,
    envelope: { kind: "detail" },
    message: "The route does not take this method.",
  },
  invalid_argument: {
    grpc: Code.InvalidArgument,
    http: 400,
    envelope: { kind: "detail" },
    message: "The request has an invalid field.",
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

/** Where error documentation and the console live; the links of the structured envelope. */
export interface ErrorLinks {
  docsBaseUrl: string;
  portalUrl: string;
}

/** The HTTP status of a reason. */
export function httpStatusOf(reason: Reason): number {
  return CATALOGUE[reason].http;
}

/**
 * The JSON body an HTTP caller gets for a reason: `{detail}` for 400/401/404, the structured
 * `{error}` envelope for 402, 413, 429 and 5xx.
 */
export function errorBody(reason: Reason, links: ErrorLinks, message?: string): object | string {
  const entry: Entry = CATALOGUE[reason];
  if (entry.envelope.kind === "plain") return entry.envelope.text;
  if (entry.envelope.kind === "detail") return { detail: reason };
  return {
    error: {
      type: entry.envelope.type,
      code: reason,
      reason,
      message: message ?? entry.message,
      docs_url: `${links.docsBaseUrl}#${reason}`,
      resolution_url: `${links.portalUrl}/${entry.envelope.resolution}`,
      portal_url: links.portalUrl,
    },
  };
}

/** The `data:` payload of the spend-cap abort event of a stream. */
export function streamAbortPayload(reason: Reason, links: ErrorLinks): object {
  return { code: reason, message: CATALOGUE[reason].message, docs_url: `${links.docsBaseUrl}#${reason}` };
}

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
