/**
 * The API-key types of the `Store` contract (see store.ts, which re-exports them): a key as
 * stored, its rotation and its limits.
 */

/** An API key as stored: only the hash of its secret, never the secret. */
export interface ApiKeyRecord {
  id: string;
  accountId: string;
  /** The first characters of the secret, to recognise it by. */
  prefix: string;
  /** Hex SHA-256 of the whole secret. */
  hash: string;
  rateLimitRps: number;
  burst: number;
  revoked: boolean;
  createTimeMs: number;
  /** When the key stops working, both its secrets (ms); unset, it never expires. */
  expireTimeMs?: number;
  /**
   * The key's own monthly cap (micros), besides its account's: a hold is taken only when both have
   * room, so one key (a test job, a shared integration) cannot spend the whole account. Unset, only
   * the account's cap applies. The stores read it in the step that takes a hold, not from a cache.
   */
  spendCapUsdMicros?: number;
  /**
   * Tokens per minute the key may take (a call's prompt plus its reserved output, the unused part
   * given back when it ends); unset, no token limit. Read from the key as the call found it, like
   * its request rate.
   */
  tokensPerMinute?: number;
  /**
   * The secret the last rotation replaced, accepted until its `expireTimeMs` (the end of the
   * rotation's grace period); kept, expired or not, until the next rotation. Whether a secret
   * works at a given time is `acceptsSecret` (`key-secrets.ts`).
   */
  previous?: Readonly<PreviousSecret>;
}

/** A secret a rotation replaced: its hash, its prefix, and the end of its grace period (ms). */
export interface PreviousSecret {
  hash: string;
  prefix: string;
  expireTimeMs: number;
}

/** Gives a key a new secret (`Store.rotateApiKey`). */
export interface RotateApiKeyRequest {
  apiKeyId: string;
  /** Hex SHA-256 of the new secret. */
  hash: string;
  /** The new secret's prefix. */
  prefix: string;
  /** How long the replaced secret is still accepted, from now; 0 ends it at once. */
  gracePeriodMs: number;
  /** A new expiry for the key (ms); unset keeps the key's own. */
  expireTimeMs?: number;
  /**
   * The caller's clock, on every backend (unlike "Time" on `Store`): the grace period starts
   * then, and an expired key is refused by it. Callers check keys by their own clock
   * (`acceptsSecret`), so the times a key holds are callers' times too, even on Redis.
   */
  nowMs: number;
}

/**
 * What `rotateApiKey` did, with the key as it is now: `rotated`, or refused and unchanged because
 * the key is revoked or expired (by the rotation's clock, and no new `expireTimeMs` given): a
 * new secret for such a key would never work.
 */
export interface KeyRotation {
  outcome: "rotated" | "revoked" | "expired";
  key: ApiKeyRecord;
}

/**
 * The limits `updateApiKey` may change: a number sets one, `null` removes it (no key cap, no token
 * limit), and a field left out is left alone.
 */
export interface ApiKeyPatch {
  spendCapUsdMicros?: number | null;
  tokensPerMinute?: number | null;
}

/** Changes a key's limits (`Store.updateApiKey`). */
export interface ApiKeyUpdate {
  apiKeyId: string;
  patch: ApiKeyPatch;
}

/** The key whose rate limit applies. */
export type RateLimitedKey = Pick<ApiKeyRecord, "id" | "accountId" | "rateLimitRps" | "burst" | "tokensPerMinute">;
