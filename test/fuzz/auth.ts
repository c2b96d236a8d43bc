import fc from "fast-check";
import type { KeyKind } from "./rules-oracle.ts";

/**
 * The keys a fuzz case presents and how its Authorization header is spelled. Most cases use a
 * good key with a high rate limit, so that they reach the body checks; the rest cover every
 * other place a key has in DESIGN's check order (missing, not a bearer, malformed, unknown,
 * revoked, rate-limited, an account that has not finished onboarding).
 */

/** The secrets of one fuzz run, made by the runner through the Admin API. */
export interface Secrets {
  good: string;
  limited: string;
  unonboarded: string;
  revoked: string;
  /** Well-formed (its checksum holds) but never issued. */
  unknown: string;
}

/** A key and a spelling of its header, as data. */
export interface AuthChoice {
  key: KeyKind;
  /** Picks the spelling: scheme case, separators, or the malformed / non-bearer value. */
  variant: number;
}

const SCHEMES = ["Bearer", "bearer", "BEARER", "bEaReR"];
const SEPARATORS = [" ", "  ", "\t", " \t "];
const TRAILERS = [" ", "\t", " \t"];
/** Authorization values that carry no bearer token: SPEC's `missing_bearer_token`. */
const NOT_BEARER = ["", "Basic dXNlcjpwYXNz", "Bearer", "Bearer:abc", "Token abc", "Bearer   ", "Bearersvc_sk_x"];

/** Values that are bearer tokens but not keys: the checksum or the shape fails. */
function malformed(variant: number, good: string): string {
  const last = good.at(-1) === "a" ? "b" : "a";
  const values = [
    "svc_sk_",
    "svc_sk_short",
    "sk-abcdef",
    `${good.slice(0, -1)}${last}`,
    `svc_sk_${"a".repeat(49)}`,
    "x".repeat(3000),
    good.toUpperCase(),
    `${good}x`,
  ];
  return values[variant % values.length] as string;
}

/** The Authorization header value, or undefined for none. */
export function authHeader(a: AuthChoice, s: Secrets): string | undefined {
  if (a.key === "missing") return undefined;
  if (a.key === "not-bearer") return NOT_BEARER[a.variant % NOT_BEARER.length];
  const token = a.key === "malformed" ? malformed(a.variant, s.good) : s[a.key];
  const v = a.variant;
  // Trailing whitespace is rare: HTTP/2 drops such a field (see runner), which hides the key.
  const trailer = v >= 44 ? TRAILERS[v % TRAILERS.length] : "";
  return `${SCHEMES[v % SCHEMES.length]}${SEPARATORS[Math.floor(v / 4) % SEPARATORS.length]}${token}${trailer}`;
}

/** Keys weighted towards the good one. */
export const authArb: fc.Arbitrary<AuthChoice> = fc.record({
  key: fc.oneof(
    { weight: 80, arbitrary: fc.constant<KeyKind>("good") },
    { weight: 4, arbitrary: fc.constant<KeyKind>("missing") },
    { weight: 3, arbitrary: fc.constant<KeyKind>("not-bearer") },
    { weight: 3, arbitrary: fc.constant<KeyKind>("malformed") },
    { weight: 2, arbitrary: fc.constant<KeyKind>("unknown") },
    { weight: 2, arbitrary: fc.constant<KeyKind>("revoked") },
    { weight: 3, arbitrary: fc.constant<KeyKind>("limited") },
    { weight: 3, arbitrary: fc.constant<KeyKind>("unonboarded") },
  ),
  variant: fc.nat({ max: 47 }),
});

/** x-request-id values: safe ones are echoed, the rest replaced (DESIGN: no header injection, bounded). */
export const requestIdArb: fc.Arbitrary<string> = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._:-]{1,16}$/),
  fc.constantFrom("a".repeat(128), "a".repeat(129), "has space", "caf\u00e9", "a,b", "../etc", "", "req_x"),
);
