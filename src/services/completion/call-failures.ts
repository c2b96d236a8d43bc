import { Code, ConnectError } from "@connectrpc/connect";
import { billingUnknownError, reasonOf, sluiceError, UNAVAILABLE_RETRY_MS } from "../../errors/catalogue.ts";
import type { Logger } from "../../logger.ts";
import { ReaderStuckError } from "./handoff.ts";

/**
 * How a call that did not end whole is reported to its reader: one error per way out, each a
 * catalogue error that says whether the call was billed.
 */

/** Why a call was stopped early; shared values, so that stopping a call builds no exception. */
export const CALLER_GONE = Object.freeze(new Error("the caller went away"));
export const CALL_OVER = Object.freeze(new Error("the call is over"));

/** The `canceled` refusal, with a message saying what became of the call when there is one. */
export const canceled = (message?: string) => sluiceError("canceled", message === undefined ? {} : { message });

/** What a reader is told of a settle that did not land: not billed (released), or unknown. */
export const unsettled = (outcome: "released" | "unknown", id: string): ConnectError =>
  outcome === "released"
    ? sluiceError("service_unavailable", { retryAfterMs: UNAVAILABLE_RETRY_MS })
    : billingUnknownError(id);

/** The error a reader gets for a call that ended before its answer was whole (and was released). */
export function failureOf(err: unknown, logger: Logger, id: string): ConnectError {
  if (err === CALLER_GONE) return canceled();
  if (err instanceof ReaderStuckError)
    return canceled("The reader took no data within the write timeout; the call was not billed.");
  if (reasonOf(err) !== undefined) return err as ConnectError;
  if (err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded)) {
    return sluiceError("service_unavailable", { retryAfterMs: UNAVAILABLE_RETRY_MS, cause: err });
  }
  logger.error("engine failed", { id, error: err instanceof Error ? err.message : String(err) });
  return sluiceError("internal_error", { cause: err });
}
