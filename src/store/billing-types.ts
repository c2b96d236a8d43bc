/**
 * The billing types of the `Store` contract (store.ts re-exports them): holds, grants, settles, releases
 * and balances, and the usage record a settle writes. Apart from store.ts so that the interface file
 * stays readable; they depend on nothing else.
 */

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
  /**
   * The key that makes the call: the hold counts against the key's own cap (`spendCapUsdMicros`)
   * besides the account's, and its settle charges the key's spend too. Unset, only the account's.
   */
  apiKeyId?: string;
}

/** Asks to hold between `minimum` and `maximum` micros of the account's cap. */
export interface ReserveRequest extends ReservationRef {
  minimum: number;
  maximum: number;
  /** A reservation not settled, released or extended within this time is released by itself. */
  ttlMs: number;
}

/**
 * What one reservation step granted and, when it granted nothing, whether that refusal is
 * temporary: callers must tell "the period's spend is used up" (wait for the next period) from
 * "other calls in flight hold the rest" (retry soon), and only the step that refused can say
 * which without a race, so it answers both at once.
 */
export interface Grant {
  /** Micros added to the hold; 0 when refused, for a renewal, or when nothing was asked for. */
  granted: number;
  /**
   * Set only on a refusal that other calls' live holds alone cause: the cap less the period's
   * spend and this call's own hold would cover `minimum` (within `maximum`), and only the other
   * holds leave too little. It clears as those calls end. The value is the ms until the soonest
   * of those holds expires unless its call renews it (at least 1), by the same clock and in the
   * same atomic step as the refusal. Unset when the spend alone leaves too little (that lasts
   * until the next period), for a settled or released id, and for a renewal.
   */
  heldByOthersMs?: number;
  /**
   * Set on a refusal the key's own cap causes (`ReservationRef.apiKeyId`): the account's cap had
   * room, or only other calls' holds stood in its way while the key's spend leaves too little.
   * Unset when the account's cap refused. Either way `heldByOthersMs` says whether it is temporary.
   */
  byKeyCap?: true;
}

/**
 * A rate-limit decision and, when a reservation was asked for and the request allowed, what it
 * holds; with `tokens` asked for and a key with a tokens-per-minute limit, the key's token budget
 * too (`allowed` false: the call was refused for tokens and nothing is held; `limit` is the
 * limit, `remaining` the tokens left, `resetMs` the time until the budget is full again).
 */
export type RateCharge = RateDecision & Grant & { tokens?: RateDecision };

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
  /**
   * The tokens the call is charged for (prompt plus completion, or plus the delivered part of a
   * cut stream): the key's token budget gets back what the admission took beyond them (see
   * `Store.settle`). Unset, nothing is given back.
   */
  usedTokens?: number;
  /**
   * The spend-alert thresholds, in percent of a cap (`SLUICE_SPEND_ALERT_THRESHOLDS`): after the
   * charge, each one the account's spend has reached (spent x 100 >= percent x cap), and each one
   * the key's spend has reached on the key's own cap, raises a `SpendAlert` the first time in the
   * period, in the same atomic step. Unset or empty, none.
   */
  alertPercents?: readonly number[];
}

/** Drops a reservation (`Store.release`). */
export interface ReleaseRequest extends ReservationRef {
  /**
   * The caller's clock (see "Time" on `Store`); only the give-back of the call's tokens reads it.
   * Unset, the store's own clock.
   */
  nowMs?: number;
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

/** A period's money for one account, or for one of its keys (`Store.keyBalances`). */
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
