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

/**
 * Names one call's reservation (its hold on the cap): the completion id, within the account's
 * billing period.
 */
export interface ReservationRef {
  accountId: string;
  /** The UTC month, such as "2026-11". */
  period: string;
  /** The completion id; one reservation per call. */
  reservationId: string;
}

/** Asks to hold between `minimum` and `maximum` micros of the account's cap. */
export interface ReserveRequest extends ReservationRef {
  minimum: number;
  maximum: number;
  /** A reservation not settled, released or extended within this time is released by itself. */
  ttlMs: number;
}

/** One rate-limit step for a key and, for a chat call, the reservation taken with it. */
export interface RateLimitRequest {
  key: RateLimitedKey;
  /** The caller's clock (see "Time" on `Store`). */
  nowMs: number;
  /** Taken only when the request is allowed, in the same atomic step. */
  reserve?: ReserveRequest;
}

/** A rate-limit decision and, when a reservation was asked for and the request allowed, what it holds. */
export interface RateCharge extends RateDecision {
  /** Micros held for the call; 0 when refused, when the cap cannot cover the minimum, or not asked for. */
  granted: number;
}

/** Grows and renews a running call's reservation (see `Store.extendReservation`). */
export interface ExtendReservationRequest extends ReserveRequest {
  /** The caller's clock (see "Time" on `Store`). */
  nowMs: number;
}

/** Settles a reservation: charges `chargeUsdMicros` and, for a completed call, writes its record. */
export interface SettleRequest extends ReservationRef {
  chargeUsdMicros: number;
  /**
   * The caller's clock at settle time (see "Time" on `Store`): it names the UTC day the charge
   * is counted on in `spendByDay`.
   */
  nowMs: number;
  /** Absent for a spend-cap abort: its delivered chunks are charged, but it gets no record. */
  record?: UsageRecordRow;
}

/** Which account's money to read, for which period. */
export interface BalanceRequest {
  accountId: string;
  period: string;
  /** The caller's clock (see "Time" on `Store`): reservations expired by then are not counted. */
  nowMs: number;
}

/** Which account's period to read day by day. */
export interface SpendByDayRequest {
  accountId: string;
  /** The UTC month, such as "2026-11". */
  period: string;
}

/** What one UTC day of a period was charged. */
export interface DaySpend {
  /** The UTC date, such as "2026-11-03". */
  date: string;
  spentUsdMicros: number;
}

/** Changes an account: the fields `patch` sets, the others left alone. */
export interface AccountUpdate {
  accountId: string;
  patch: AccountPatch;
}

/** One page of an account's usage records. */
export interface UsagePageRequest {
  accountId: string;
  /** At most this many records (the caller applies its own default and maximum). */
  pageSize: number;
  /** Empty for the first page; otherwise a `nextPageToken` this store returned. */
  pageToken: string;
}

/** A period's money for one account. */
export interface Balance {
  spentUsdMicros: number;
  reservedUsdMicros: number;
}

/**
 * How a call's hold ended, which is the answer to "was it billed?": `settled` (charged, now or
 * by an earlier settle whose reply was lost) or `released` (never charged, and never will be).
 * Once a completion id has an outcome it never changes, so a late or repeated command cannot
 * charge a released call or refund a settled one. Backends keep closed ids for as long as a
 * command for them can still arrive, and no longer (the Redis store 70 days, the memory store
 * ten minutes and at most a million), so that they do not grow with traffic for ever.
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
 * command that did happen, or will: see `Store.settle`.
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
 * What the services need from persistence, and nothing more.
 *
 * **Arguments.** Each method takes at most one argument: the id, hash or record it reads or
 * writes, or one request object when it needs more than one thing.
 *
 * **Time.** `nowMs` is the caller's clock, in ms. The memory store uses it as given. The Redis
 * store ignores it: its scripts read the Redis server's clock (`TIME`), so that processes whose
 * clocks disagree still agree on rates and expiries; only a Redis store made with
 * `serverTime: false` (tests that drive time by hand) uses the caller's `nowMs`.
 *
 * **Errors.** A method fails only in the ways its `@throws` says. Every method of the Redis
 * store may fail with a `service_unavailable` ConnectError (503 with `Retry-After`) when Redis is
 * unreachable or gives no answer within `SLUICE_STORE_TIMEOUT_MS` (the guarded deadline). Such a
 * failure is marked `wasNotSent` when the command certainly never reached Redis (no connection);
 * any other failure may hide a write that happened, or will happen when a stalled server thaws,
 * and each write below says how its callers resolve that. The memory store never fails, except
 * with `InvalidPageTokenError` as `listUsageRecords` says.
 */
export interface Store {
  /**
   * Stores a new account (an admin's CreateAccount), and indexes its email for
   * `findAccountsByEmail`.
   * @throws `service_unavailable` (Redis); the account may have been stored anyway (and if it
   * was, it is indexed).
   */
  createAccount(account: AccountRecord): Promise<void>;
  /**
   * The account, or undefined when there is none (a call's status checks, Admin, Billing).
   * @throws `service_unavailable` (Redis).
   */
  getAccount(accountId: string): Promise<AccountRecord | undefined>;
  /**
   * Sets the fields the patch sets, and returns the account as it is now (undefined when there
   * is none). The Redis store drops its cached copies at once, here and, through pub/sub, in
   * every process.
   * @throws `service_unavailable` (Redis); the patch may have been applied anyway.
   */
  updateAccount(update: AccountUpdate): Promise<AccountRecord | undefined>;
  /**
   * Whether any account was ever stored. Only the dev bootstrap asks: it makes its account on an
   * empty store only. A yes-or-no, not a count, so no backend has to keep an exact count.
   * @throws `service_unavailable` (Redis).
   */
  hasAccounts(): Promise<boolean>;
  /**
   * The accounts whose email is `email`, exactly but ignoring case and surrounding spaces (both
   * sides are trimmed and lower-cased), in no particular order; [] when none (Admin's
   * SearchAccounts). Emails never change after `createAccount`, which indexes them. The Redis
   * store also indexes accounts created before the index existed, once per database, in the
   * background after it starts (see `createRedisStore`): until that pass ends, such an account
   * may be missing from the answer.
   * @throws `service_unavailable` (Redis).
   */
  findAccountsByEmail(email: string): Promise<AccountRecord[]>;

  /**
   * Stores a new API key (its hash, never its secret).
   * @throws `service_unavailable` (Redis); the key may be partly stored, but its secret was
   * never shown to anyone, so it cannot be used.
   */
  createApiKey(key: ApiKeyRecord): Promise<void>;
  /**
   * The key whose secret hashes to `hash`, revoked or not; undefined when there is none. Every
   * keyed call asks, so the Redis store caches answers (misses too) for at most 1 s.
   * @throws `service_unavailable` (Redis).
   */
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Marks a key revoked and returns it (undefined when there is none); a revoked key stays
   * listed. The Redis store drops cached copies in every process at once.
   * @throws `service_unavailable` (Redis); the key may have been revoked anyway (asking again
   * is harmless).
   */
  revokeApiKey(apiKeyId: string): Promise<ApiKeyRecord | undefined>;
  /**
   * An account's keys, revoked ones included, in no particular order.
   * @throws `service_unavailable` (Redis).
   */
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;

  /**
   * Charges one request to its key's rate limit (one GCRA step): an allowed request is counted,
   * a refused one says how long to wait and costs nothing. With `reserve`, an allowed request
   * also takes its reservation in the same atomic step (as `extendReservation` would), so a
   * chat call pays one round trip for both; a refused one holds nothing.
   * @throws `service_unavailable` (Redis); the charge and the reservation may have happened
   * anyway, so a caller that asked for one releases it by completion id.
   */
  chargeRateLimit(request: RateLimitRequest): Promise<RateCharge>;
  /**
   * Extends a running call's reservation, in money and in time, and returns the micros added
   * (0 when refused). It adds min(maximum, cap - spent - reserved) when that is at least
   * `minimum`, and renews the expiry to `ttlMs` from now. With `maximum` 0 it only renews: a live
   * reservation is kept alive even above a cap lowered since, and an expired or released one is
   * never brought back. A reservation that is not live (it expired while its process stalled,
   * or was never taken) is taken afresh. A settled or released id is refused (0), so an
   * extension still in flight can never outlive its call.
   * @throws `service_unavailable` (Redis); the extension may have happened anyway: it is
   * returned by the settle or release that ends the call, or expires.
   */
  extendReservation(request: ExtendReservationRequest): Promise<number>;
  /**
   * Replaces the reservation by its charge, atomically with the record, and closes its id;
   * idempotent per id. The charge is cut to what the cap still allows (a call whose reservation
   * expired while it ran), and the record carries the amount actually charged. Returns
   * `released` (nothing charged) when the id was released first.
   * @throws `service_unavailable` (Redis). Unless `wasNotSent`, the settle may have happened
   * or may still happen: the caller learns which by `release`, which closes the id and answers
   * `settled` if it did (see the README, "The life of a call").
   */
  settle(request: SettleRequest): Promise<CallOutcome>;
  /**
   * Drops a reservation without charge and closes its id, so that a settle or an extension
   * still in flight can never land afterwards; idempotent per id. Returns `settled` when the id
   * had already been settled: that is how a settle whose reply was lost is resolved. Closed ids
   * are kept for as long as a command for them can still arrive (see each backend).
   * @throws `service_unavailable` (Redis); callers ask again until it answers.
   */
  release(reservation: ReservationRef): Promise<CallOutcome>;
  /**
   * A period's spent micros and live reservations (expired ones are dropped first).
   * @throws `service_unavailable` (Redis).
   */
  balance(request: BalanceRequest): Promise<Balance>;
  /**
   * A period's charges by UTC day: only days that were charged, ascending by date. Each settle
   * that charges more than 0 (a spend-cap abort's partial charge too) adds its charge to its day
   * in the same atomic step as to `spent`, so the days sum to exactly what `spent` grew by since
   * day totals were kept (spend settled before then counts in `spent` on no day). The day is the
   * settle's time (`nowMs`, or the Redis server's clock): the UTC date, or, when that date lies
   * outside the period (a call of the 30th settled just after midnight on the 1st), the nearest
   * day of the period, so that a period's days hold all its spend.
   * @throws `service_unavailable` (Redis).
   */
  spendByDay(request: SpendByDayRequest): Promise<DaySpend[]>;

  /**
   * One page of an account's usage records, newest first. A walk neither skips nor repeats a
   * record when records are added meanwhile.
   * @throws `InvalidPageTokenError` for a page token this store did not issue (before anything
   * is sent); `service_unavailable` (Redis).
   */
  listUsageRecords(request: UsagePageRequest): Promise<UsagePage>;

  /**
   * Resolves when the backend answers; `/readyz` depends on it.
   * @throws `service_unavailable` (Redis).
   */
  ping(): Promise<void>;
  /** Lets go of the backend's connections; the store is not used afterwards. Never fails. */
  close(): Promise<void>;
}
