/**
 * The persistence contract of Sluice. Services depend on this interface only, so that the
 * embedded memory backend and the Redis backend are interchangeable and pass one contract
 * suite. Every method that touches money is atomic on its own: the billing invariants
 * (spent + live reservations <= cap) must hold between any two calls, from any process.
 *
 * Money is integer US-dollar micros held in `number` (exact up to 2^53, about $9 billion).
 */

export type PaymentStatus = "ok" | "failed";
export type SubscriptionStatus = "active" | "canceled";

/** An account as stored. */
export interface AccountRecord {
  id: string;
  email?: string;
  /** Unset while onboarding is incomplete. */
  spendCapUsdMicros?: number;
  onboardingComplete: boolean;
  paymentStatus: PaymentStatus;
  subscriptionStatus: SubscriptionStatus;
  createTimeMs: number;
}

/** The fields `updateAccount` may change; unset fields are left alone. */
export type AccountPatch = Partial<
  Pick<AccountRecord, "spendCapUsdMicros" | "onboardingComplete" | "paymentStatus" | "subscriptionStatus">
>;

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
}

/** The billing trace of one completed call, written together with its charge. */
export interface UsageRecordRow {
  /** The completion id. */
  id: string;
  accountId: string;
  apiKeyId: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  costUsdMicros: number;
  createTimeMs: number;
}

/** What a rate-limit check decided, with the state the `x-ratelimit-*` headers report. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Until the bucket is full again. */
  resetMs: number;
  /** Until the next request would be allowed; 0 when allowed. */
  retryAfterMs: number;
}

/** The key whose rate limit applies. */
export type RateLimitedKey = Pick<ApiKeyRecord, "id" | "accountId" | "rateLimitRps" | "burst">;

/** A rate-limit decision and, when a reservation was asked for and the call admitted, what it holds. */
export interface Admission extends RateDecision {
  /** Micros held for the call; 0 when refused, not admitted, or not asked for. */
  granted: number;
}

/** A period's money for one account. */
export interface Balance {
  spentUsdMicros: number;
  reservedUsdMicros: number;
}

/** Asks to hold between `minimum` and `maximum` micros of the account's cap. */
export interface ReserveRequest {
  accountId: string;
  /** The UTC month, such as "2026-11". */
  period: string;
  /** The completion id; one reservation per call. */
  reservationId: string;
  minimum: number;
  maximum: number;
  /** A reservation not settled, released or extended within this time is released by itself. */
  ttlMs: number;
  nowMs: number;
}

/** Settles a reservation: charges `chargeUsdMicros` and, for a completed call, writes its record. */
export interface SettleRequest {
  accountId: string;
  period: string;
  reservationId: string;
  chargeUsdMicros: number;
  /** Absent for a spend-cap abort: its delivered chunks are charged, but it gets no record. */
  record?: UsageRecordRow;
}

/**
 * How a call's hold ended, which is the answer to "was it billed?": `settled` (charged, now or
 * by an earlier settle whose reply was lost) or `released` (never charged, and never will be).
 * Once a completion id has an outcome it never changes, so a late or repeated command cannot
 * charge a released call or refund a settled one.
 */
export type CallOutcome = "settled" | "released";

/** One page of usage records, newest first. */
export interface UsagePage {
  records: UsageRecordRow[];
  nextPageToken: string;
}

const NOT_SENT = Symbol("sluice.store.not-sent");

/**
 * Marks a store failure whose command never reached the backend (no connection), so that it
 * certainly did not happen. Any other failure (a timeout, a lost connection) may hide a
 * command that did happen, or will: see `Store.release`.
 */
export function markNotSent<E extends object>(error: E): E {
  Object.defineProperty(error, NOT_SENT, { value: true });
  return error;
}

/** Whether a store failure is known not to have reached the backend (see `markNotSent`). */
export function wasNotSent(error: unknown): boolean {
  return typeof error === "object" && error !== null && NOT_SENT in error;
}

/**
 * Every method may fail with a `service_unavailable` ConnectError (the backend did not answer
 * within its deadline, or is unreachable); such a failure is marked `wasNotSent` when the
 * command certainly did not run. Methods fail with nothing else.
 */
export interface Store {
  createAccount(account: AccountRecord): Promise<void>;
  getAccount(id: string): Promise<AccountRecord | undefined>;
  updateAccount(id: string, patch: AccountPatch): Promise<AccountRecord | undefined>;
  /** How many accounts exist; the dev bootstrap runs only on an empty store. */
  countAccounts(): Promise<number>;

  createApiKey(key: ApiKeyRecord): Promise<void>;
  getApiKey(id: string): Promise<ApiKeyRecord | undefined>;
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  revokeApiKey(id: string): Promise<ApiKeyRecord | undefined>;
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;

  /**
   * One GCRA step for a key: admits and records the request, or says how long to wait. With
   * `reserve`, an admitted call also takes its hold in the same atomic step, so a chat call
   * pays one round trip for both (a refused call holds nothing).
   */
  admit(key: RateLimitedKey, nowMs: number, reserve?: ReserveRequest): Promise<Admission>;

  balance(accountId: string, period: string, nowMs: number): Promise<Balance>;
  /**
   * Holds min(maximum, cap - spent - reserved) when that is at least `minimum`, and returns
   * the amount held (0 when refused). Calling it again for a live reservation adds to it
   * (an extension) and renews its expiry; `minimum` 0 with `maximum` 0 only renews a live
   * hold and never creates one. A settled or released id is refused (0).
   */
  reserve(request: ReserveRequest): Promise<number>;
  /**
   * Replaces the reservation by its charge, atomically with the record; idempotent per id.
   * The charge is cut to what the cap still allows (a call whose hold expired while it ran),
   * and the record carries the amount actually charged. Returns `released` (nothing charged)
   * when the id was released first.
   */
  settle(request: SettleRequest): Promise<CallOutcome>;
  /**
   * Drops a reservation without charge and closes its id, so that a settle or an extension
   * still in flight can never land afterwards. Returns `settled` when the id had already been
   * settled: that is how a settle whose reply was lost is resolved, by completion id.
   */
  release(accountId: string, period: string, reservationId: string): Promise<CallOutcome>;

  listUsageRecords(accountId: string, pageSize: number, pageToken: string): Promise<UsagePage>;

  /** Resolves when the backend answers; `/readyz` depends on it. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
