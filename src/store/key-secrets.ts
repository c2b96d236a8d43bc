import { timingSafeEqual } from "node:crypto";
import type { ApiKeyRecord } from "./store.ts";

/**
 * Compares two hex hashes in constant time, so a lookup's answer leaks nothing of a secret.
 * Anything but whole hex (which `Buffer.from` would cut short) never compares equal.
 */
export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length > 0 && x.length * 2 === a.length && y.length * 2 === b.length && x.length === y.length
    ? timingSafeEqual(x, y)
    : false;
}

/**
 * Whether a key accepts, at `nowMs`, the secret that hashes to `hash`: not when it is revoked or
 * expired; its current secret otherwise; the secret its last rotation replaced only until that
 * secret's grace period ends. Every keyed call decides with it, on the record the store found by
 * the hash, so expiries and grace periods end on time whatever the store cached.
 */
export function acceptsSecret(key: ApiKeyRecord, hash: string, nowMs: number): boolean {
  if (key.revoked || (key.expireTimeMs !== undefined && nowMs >= key.expireTimeMs)) return false;
  if (hashesEqual(key.hash, hash)) return true;
  return key.previous !== undefined && nowMs < key.previous.expireTimeMs && hashesEqual(key.previous.hash, hash);
}

/**
 * The secret a rotation replaced, while it still works at `nowMs` (on a key not revoked or
 * expired); undefined otherwise. Listings show it so an operator sees how long it has left.
 */
export function workingPrevious(key: ApiKeyRecord, nowMs: number): ApiKeyRecord["previous"] {
  const { previous } = key;
  return previous !== undefined && acceptsSecret(key, previous.hash, nowMs) ? previous : undefined;
}
