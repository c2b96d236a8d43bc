/**
 * The console's only way to the server: Connect RPCs over JSON, same-origin, to the paths the public port
 * forwards to the core (`POST /sluice.billing.v1.BillingService/GetBalance`). Also turns a failed call into
 * a sentence, by the `google.rpc.ErrorInfo` reason every core error carries.
 */
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { BillingService } from "../../gen/sluice/billing/v1/billing_service_pb.ts";
import { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import { getSession } from "./session.ts";

/** Adds the signed-in credential as a bearer, unless the call names its own (sign-in checks a new one). */
const bearer: Interceptor = (next) => (req) => {
  const session = getSession();
  if (session && !req.header.has("authorization")) req.header.set("authorization", `Bearer ${session.credential}`);
  return next(req);
};

const transport = createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: false,
  interceptors: [bearer],
  defaultTimeoutMs: 15_000,
});

/** The holder's identity RPCs (API key). */
export const identity = createClient(IdentityService, transport);
/** The holder's billing RPCs (API key). */
export const billing = createClient(BillingService, transport);
/** The operator's RPCs (admin token). */
export const admin = createClient(AdminService, transport);

/** Call options that send `credential` instead of the session's: how sign-in checks what was pasted. */
export function withCredential(credential: string): { headers: Record<string, string> } {
  return { headers: { authorization: `Bearer ${credential}` } };
}

/** The catalogue reason of a core error (`invalid_api_key`), or nothing for other failures. */
export function errorReason(err: unknown): string | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  return err.findDetails(ErrorInfoSchema)[0]?.reason;
}

/** The delay the server asked for before a retry, in milliseconds, from `google.rpc.RetryInfo`. */
export function retryDelayMs(err: unknown): number | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const delay = err.findDetails(RetryInfoSchema)[0]?.retryDelay;
  if (!delay) return undefined;
  return Number(delay.seconds) * 1000 + Math.round(delay.nanos / 1e6);
}

/** " Try again in 3 seconds." when the server gave a delay, else nothing. */
function retryHint(err: unknown): string {
  const ms = retryDelayMs(err);
  if (ms === undefined) return "";
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  return ` Try again in ${seconds} second${seconds === 1 ? "" : "s"}.`;
}

/** Sentences for the catalogue reasons a console user can meet. */
const REASONS: Record<string, string> = {
  invalid_api_key: "This API key is not valid: it is unknown, malformed, revoked or expired.",
  missing_bearer_token: "No credential was sent. Sign in with an API key or the admin token.",
  invalid_admin_token: "This admin token is not valid: it does not match the server's admin token.",
  admin_disabled:
    "The Admin API is off on this server (SLUICE_ADMIN_TOKEN is not set), so the admin token " + "cannot sign in.",
  api_key_rate_limited: "Too many requests with this API key right now: its rate limit was reached.",
  service_unavailable: "Sluice is temporarily unavailable.",
  account_not_found: "There is no account with this id.",
  api_key_not_found: "There is no API key with this id.",
};

/**
 * Turns any failure of an RPC into one sentence for a `role="alert"` region: the catalogue reason when the
 * core sent one, a network sentence when the server could not be reached, the server's own words otherwise.
 */
export function describeError(err: unknown): string {
  const reason = errorReason(err);
  if (reason && REASONS[reason]) return REASONS[reason] + retryHint(err);
  if (!(err instanceof ConnectError)) return err instanceof Error ? err.message : String(err);
  if (reason) return `The server refused the request (${reason}): ${err.rawMessage}`;
  if (err.cause instanceof TypeError || err.code === Code.Unavailable) {
    return "Cannot reach the Sluice server: check your connection, or see the Status page.";
  }
  if (err.code === Code.DeadlineExceeded) return "The server took too long to answer. Try again.";
  if (err.code === Code.Unimplemented)
    return "This server does not offer this call here (an older Sluice, or the Admin API kept off this port).";
  return `The request failed (${Code[err.code]}): ${err.rawMessage}`;
}
