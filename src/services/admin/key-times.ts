import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { sluiceError } from "../../errors/catalogue.ts";

const DAY_MS = 24 * 3600 * 1000;

/**
 * The longest grace period a rotation gives the secret it replaces: long enough to roll a new
 * secret out anywhere, short enough that a rotation still means the old one ends.
 */
export const MAX_GRACE_PERIOD_MS = 30 * DAY_MS;

/** How far ahead a key's expiry may lie; a key meant to last for ever has none. */
export const MAX_KEY_LIFETIME_MS = 3650 * DAY_MS;

/** The 400 `invalid_argument` of an admin request, naming its field (`ErrorInfo.metadata.field`). */
export function invalidField(field: string, problem: string): ConnectError {
  return sluiceError("invalid_argument", { message: `${field}: ${problem}`, metadata: { field } });
}

/** The `expiration` oneof of `CreateApiKeyRequest` and `RotateApiKeyRequest`. */
export type Expiration =
  | { case: "expireTime"; value: Timestamp }
  | { case: "ttl"; value: Duration }
  | { case: undefined; value?: undefined };

/**
 * A Duration in whole ms, rounded up (so a positive one is never 0), or 400 naming `field` when
 * it is negative or malformed (seconds and nanos of opposite signs, nanos out of range).
 */
function nonNegativeMs(d: Duration, field: string): number {
  if (d.seconds < 0n || d.nanos < 0 || d.nanos > 999_999_999) throw invalidField(field, "must be a duration >= 0");
  // Past the largest lifetime it is refused anyway, so the seconds need not be exact there.
  const seconds = d.seconds > BigInt(MAX_KEY_LIFETIME_MS) ? Number.MAX_SAFE_INTEGER : Number(d.seconds) * 1000;
  return seconds + Math.ceil(d.nanos / 1_000_000);
}

/** A rotation's grace period in ms: unset is 0 (the old secret ends at once), at most 30 days. */
export function gracePeriodMsOf(grace: Duration | undefined): number {
  const ms = grace === undefined ? 0 : nonNegativeMs(grace, "grace_period");
  if (ms > MAX_GRACE_PERIOD_MS) throw invalidField("grace_period", "must be at most 30 days");
  return ms;
}

/**
 * The expiry a request sets, in ms, or undefined when it sets none: `expire_time` as given,
 * `ttl` from `nowMs` (the admin process's clock, the one key checks use too). Either must lie
 * after `nowMs` and at most 10 years ahead; 400 naming the field otherwise.
 */
export function expireTimeMsOf(expiration: Expiration, nowMs: number): number | undefined {
  if (expiration.case === undefined) return undefined;
  const field = expiration.case === "ttl" ? "ttl" : "expire_time";
  let ms: number;
  if (expiration.case === "ttl") ms = nowMs + nonNegativeMs(expiration.value, field);
  else {
    const { seconds, nanos } = expiration.value;
    if (nanos < 0 || nanos > 999_999_999) throw invalidField(field, "nanos must be within 0..999999999");
    const farthest = BigInt(nowMs + MAX_KEY_LIFETIME_MS);
    ms = seconds * 1000n > farthest ? Number.MAX_SAFE_INTEGER : Number(seconds) * 1000 + Math.ceil(nanos / 1_000_000);
  }
  if (ms <= nowMs)
    throw invalidField(field, expiration.case === "ttl" ? "must be more than 0" : "must be in the future");
  if (ms > nowMs + MAX_KEY_LIFETIME_MS) throw invalidField(field, "must be at most 10 years ahead");
  return ms;
}
