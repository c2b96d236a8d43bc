/**
 * The persistence contract of Sluice. Services depend on this interface only, so that the
 * embedded memory backend and the Redis backend are interchangeable and pass one contract
 * suite. Every method that touches money is atomic on its own: the billing invariants
 * (spent + live reservations <= cap) must hold between any two calls, from any process.
 *
 * Money is integer US-dollar micros held in `number` (exact up to 2^53, about $9 billion).
 */

import type {
  Balance,
  BalanceRequest,
  CallOutcome,
  DaySpend,
  ExtendReservationRequest,
  Grant,
  RateCharge,
  ReleaseRequest,
  ReserveRequest,
  SettleRequest,
  SpendByDayRequest,
  UsageRecordRow,
} from "./billing-types.ts";
import type { ApiKeyRecord, ApiKeyUpdate, KeyRotation, RateLimitedKey, RotateApiKeyRequest } from "./key-types.ts";
import type { WebhookStore } from "./webhook-types.ts";

/** The billing types of the contract, kept apart so that this file stays the interface. */
export type * from "./billing-types.ts";
/** The API-key types of the contract: records, rotation and limits. */
export type * from "./key-types.ts";
/** The spend-alert types of the contract: alerts, webhook endpoints and their delivery queue. */
export type * from "./webhook-types.ts";

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

/** One rate-limit step for a key and, for a chat call, the reservation taken with it. */
export interface RateLimitRequest {
  key: RateLimitedKey;
  /** The caller's clock (see "Time" on `Store`). */
  nowMs: number;
  /** Taken only when the request is allowed, in the same atomic step. */
  reserve?: ReserveRequest;
  /**
   * A chat call's tokens (its prompt plus its reserved output), for a key with a tokens-per-minute
   * limit: with `reserve`, they are taken from the key's token budget in the same step as the hold,
   * and a budget that cannot cover them yet refuses the call before any hold (`RateCharge.tokens`).
   * A request too big for a whole minute's budget takes the whole budget, once it is full. 0 (a
   * chat call refused before it was sized) only reads the budget; unset (not a chat call), the
   * budget is neither read nor answered.
   */
  tokens?: number;
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
   * Stores a new API key (its hash, never its secret), with its expiry if it has one.
   * @throws `service_unavailable` (Redis); the key may be partly stored, but its secret was
   * never shown to anyone, so it cannot be used.
   */
  createApiKey(key: ApiKeyRecord): Promise<void>;
  /**
   * The key whose current secret or last replaced secret (`previous`) hashes to `hash`, revoked,
   * expired or not; undefined when there is none (a secret replaced before the last rotation is
   * forgotten). Callers decide with `acceptsSecret`, by their clock, so expiries and grace periods
   * end on time even on a cached answer. Every keyed call asks, so the Redis store caches answers
   * (misses too) for at most 1 s: a revocation or rotation made elsewhere drops them at once
   * through pub/sub, or within that second if the message is lost.
   * @throws `service_unavailable` (Redis).
   */
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Marks a key revoked and returns it (undefined when there is none); a revoked key stays
   * listed, and none of its secrets works any more. The Redis store drops cached copies (of
   * both secrets) in every process at once.
   * @throws `service_unavailable` (Redis); the key may have been revoked anyway (asking again
   * is harmless).
   */
  revokeApiKey(apiKeyId: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Gives a key a new secret, atomically: the key keeps its id, account, limits and rate-limit
   * state; `hash` and `prefix` become the new secret's; the secret replaced becomes `previous`,
   * accepted until `nowMs + gracePeriodMs`; the one `previous` held before is forgotten, so it
   * ends at once even if its grace had time left. `expireTimeMs`, when set, replaces the key's
   * expiry. No reader, in any process, ever finds neither secret working: the new secret is
   * found by its hash before the switch (on Redis its index entry is written first, then the key
   * is switched in one script). A revoked key, or one expired by `nowMs` with no new
   * `expireTimeMs`, is not rotated. Returns undefined when there is no such key. The Redis store
   * drops cached copies of the three secrets in every process at once.
   * @throws `service_unavailable` (Redis); the key may have been rotated anyway, to a secret no
   * one was shown, while its old secret keeps its grace period. `listApiKeys` tells (the prefix
   * changed); rotating again then ends that old secret at once, since only one replaced secret
   * is kept.
   */
  rotateApiKey(request: RotateApiKeyRequest): Promise<KeyRotation | undefined>;
  /**
   * Sets or removes a key's own cap and token limit (`ApiKeyPatch`) and returns the key as it is
   * now (undefined when there is none); revoked keys too. A new cap rules the next hold at once,
   * in every process (holds read it in their store step); a lowered one refuses growth but does
   * not cut holds already taken, as with an account's cap. The Redis store drops cached copies of
   * the key in every process at once, so a new token limit applies within that moment too.
   * @throws `service_unavailable` (Redis); the patch may have been applied anyway.
   */
  updateApiKey(update: ApiKeyUpdate): Promise<ApiKeyRecord | undefined>;
  /**
   * An account's keys, revoked ones included, in no particular order.
   * @throws `service_unavailable` (Redis).
   */
  listApiKeys(accountId: string): Promise<ApiKeyRecord[]>;

  /**
   * Charges one request to its key's rate limit (one GCRA step): an allowed request is counted,
   * a refused one says how long to wait and costs nothing. With `reserve`, an allowed request
   * also takes its reservation in the same atomic step (as `extendReservation` would, with the
   * same `Grant` answer), so a chat call pays one round trip for both; a refused one holds
   * nothing. With `tokens`, the key's token budget is charged in that step too (see
   * `RateLimitRequest.tokens`): a call it refuses is counted by the request rate but holds
   * nothing, and a call the cap refuses takes no tokens.
   * @throws `service_unavailable` (Redis); the charge and the reservation may have happened
   * anyway, so a caller that asked for one releases it by completion id.
   */
  chargeRateLimit(request: RateLimitRequest): Promise<RateCharge>;
  /**
   * Extends a running call's reservation, in money and in time, and returns the micros added
   * (0 when refused; `Grant` says when a refusal is temporary and which cap refused). It adds
   * min(maximum, cap - spent - reserved) when that is at least `minimum`, and no more than the
   * key's own cap leaves (its cap less its spend and its holds) when the hold names a key that
   * has one: both caps are checked and the hold counted against both in one step. It renews the expiry
   * to `ttlMs` from now. With `maximum` 0 it only renews: a live reservation is kept alive even
   * above a cap lowered since, and an expired or released one is never brought back. A
   * reservation that is not live (it expired while its process stalled, or was never taken) is
   * taken afresh. A settled or released id is refused (0), so an extension still in flight can
   * never outlive its call.
   * @throws `service_unavailable` (Redis); the extension may have happened anyway: it is
   * returned by the settle or release that ends the call, or expires.
   */
  extendReservation(request: ExtendReservationRequest): Promise<Grant>;
  /**
   * Replaces the reservation by its charge, atomically with the record, and closes its id;
   * idempotent per id. The charge is cut to what the cap still allows (a call whose reservation
   * expired while it ran), and by the key's own cap too (with `apiKeyId`), whose spend the
   * charge is added to in the same step; the record carries the amount actually charged. The key's
   * token budget gets back the tokens its admission took beyond `usedTokens`, as far as the budget
   * has not refilled since (the part of the take still counted against it). Returns
   * `released` (nothing charged) when the id was released first. In the same step it raises the
   * spend alerts of `alertPercents` that the spend reached (each once per period and scope, read
   * against the caps as they are then: a raised cap does not re-arm a threshold that fired, a
   * lowered one fires, at the next settle, each threshold the spend is now past), and they are in
   * the webhook queue when it returns (on Redis, an alert whose queueing failed is queued by a
   * later `webhooks.sweep`).
   * @throws `service_unavailable` (Redis). Unless `wasNotSent`, the settle may have happened
   * or may still happen: the caller learns which by `release`, which closes the id and answers
   * `settled` if it did (see the README, "The life of a call").
   */
  settle(request: SettleRequest): Promise<CallOutcome>;
  /**
   * Drops a reservation without charge and closes its id, so that a settle or an extension
   * still in flight can never land afterwards; idempotent per id. Returns `settled` when the id
   * had already been settled: that is how a settle whose reply was lost is resolved. Closed ids
   * are kept for as long as a command for them can still arrive (see each backend). A call that
   * is not billed is not counted against its key's token limit either: the first release gives
   * back all the tokens its admission took, as far as the budget has not refilled since.
   * @throws `service_unavailable` (Redis); callers ask again until it answers.
   */
  release(reservation: ReleaseRequest): Promise<CallOutcome>;
  /**
   * A period's spent micros and live reservations (expired ones are dropped first).
   * @throws `service_unavailable` (Redis).
   */
  balance(request: BalanceRequest): Promise<Balance>;
  /**
   * A period's money by key, for the keys that made holds or charges in it (a key missing from the
   * map has spent and holds nothing): the key's settled charges and its live holds, counted in the
   * same steps as the account's, so they sum to no more than the account's (holds and charges made
   * without a key count for the account only).
   * @throws `service_unavailable` (Redis).
   */
  keyBalances(request: BalanceRequest): Promise<Map<string, Balance>>;
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
   * Spend alerts' webhook endpoints and their durable delivery queue (see `WebhookStore`); the
   * alerts themselves are raised by `settle` (`SettleRequest.alertPercents`).
   */
  readonly webhooks: WebhookStore;

  /**
   * Resolves when the backend answers; `/readyz` depends on it.
   * @throws `service_unavailable` (Redis).
   */
  ping(): Promise<void>;
  /** Lets go of the backend's connections; the store is not used afterwards. Never fails. */
  close(): Promise<void>;
}
