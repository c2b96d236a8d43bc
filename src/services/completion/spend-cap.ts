import type { ConnectError } from "@connectrpc/connect";
import { sluiceError } from "../../errors/catalogue.ts";
import type { Grant } from "../../store/store.ts";
import { msUntilNextPeriod } from "./pricing.ts";

/**
 * The `ErrorInfo.metadata` key of `spend_cap_exceeded` that says whether the refusal is
 * temporary: "true" when only other calls' live holds stand in the way (retry after the short
 * delay given), "false" when the period's spend is used up (retry in the next period, or raise
 * the cap). It is always set, so a caller can tell "not temporary" from a server that does not
 * say; gRPC and Connect callers read it, HTTP callers tell the two apart by `Retry-After`.
 */
export const TEMPORARY = "temporary";

/**
 * The `ErrorInfo.metadata` key of `spend_cap_exceeded` that names the cap that refused: `account`
 * (the account's monthly cap) or `key` (the calling key's own cap, which an operator may set
 * below the account's). Always set, like `TEMPORARY`.
 */
export const CAP = "cap";

/** The least delay of a temporary refusal: HTTP's `Retry-After` counts whole seconds, from 1. */
export const MIN_HELD_RETRY_MS = 1000;

/** The message of a temporary refusal; the catalogue's (raise the cap or wait) is the other one. */
const HELD_MESSAGE =
  "Calls in flight hold the rest of this month's spend cap. Retry after the delay given, when they have ended.";

/** The messages of a key cap's refusals, lasting and temporary. */
const KEY_MESSAGE =
  "The call would exceed this API key's monthly spend cap. Raise the key's cap, use another key, or wait for the " +
  "next period.";
const KEY_HELD_MESSAGE =
  "Calls in flight with this API key hold the rest of its monthly spend cap. Retry after the delay given, when " +
  "they have ended.";

/**
 * The delay of a refusal that other calls' holds cause: until the soonest of them expires unless
 * renewed (`Grant.heldByOthersMs`). By then that hold has ended (its call finished, or its process
 * died and the hold lapsed) or its call is still running and has renewed it. It is an upper
 * bound more than a forecast: calls usually end sooner, and a retry before it costs only a
 * rate-limit token. At least 1 s; at most the reservation TTL (no hold outlives it unrenewed)
 * and the time to the next period (whose budget this period's holds do not touch).
 */
export function heldRetryMs(heldByOthersMs: number, nowMs: number, ttlMs: number): number {
  return Math.max(MIN_HELD_RETRY_MS, Math.min(heldByOthersMs, ttlMs, msUntilNextPeriod(nowMs)));
}

/**
 * The `spend_cap_exceeded` refusal of a reservation step that granted nothing, at admission or
 * when a running call grows its hold: one builder, so both say the same for the same cause. A
 * refusal that only other calls' holds cause is temporary (`TEMPORARY` "true", `heldRetryMs`);
 * one the period's spend causes waits for the next period (`TEMPORARY` "false"). `CAP` says
 * whether the account's cap or the key's own refused (`Grant.byKeyCap`).
 */
export function spendCapRefusal(
  grant: Grant,
  nowMs: number,
  ttlMs: number,
  headers?: Record<string, string>,
): ConnectError {
  const held = grant.heldByOthersMs;
  const byKey = grant.byKeyCap === true;
  const lasting = held === undefined;
  const message = byKey ? (lasting ? KEY_MESSAGE : KEY_HELD_MESSAGE) : lasting ? undefined : HELD_MESSAGE;
  return sluiceError("spend_cap_exceeded", {
    ...(message !== undefined && { message }),
    retryAfterMs: lasting ? msUntilNextPeriod(nowMs) : heldRetryMs(held, nowMs, ttlMs),
    metadata: { [TEMPORARY]: String(!lasting), [CAP]: byKey ? "key" : "account" },
    headers,
  });
}
