import { randomUUID } from "node:crypto";
import { dayInPeriod, daySpends } from "../days.ts";
import { gcra, tokenGiveBackMs, tokenStep } from "../gcra.ts";
import { raiseAlerts, type ScopeSpend } from "../spend-alerts.ts";
import type {
  AccountRecord,
  ApiKeyRecord,
  Balance,
  CallOutcome,
  Grant,
  RateCharge,
  ReservationRef,
  ReserveRequest,
  SettleRequest,
  SpendAlert,
  Store,
  UsageRecordRow,
} from "../store.ts";

/** What a call's admission took from its key's token budget, so that its end can give the rest back. */
interface TokenTake {
  count: number;
  msPerToken: number;
  /** The budget's stored time right after the take (`tokenGiveBackMs`). */
  tatAfterMs: number;
}

interface Reservation {
  amount: number;
  expiresAtMs: number;
  /** The key the hold counts against besides its account (`ReservationRef.apiKeyId`). */
  apiKeyId?: string;
  tokens?: TokenTake;
}

interface PeriodState {
  spent: number;
  /** What `spent` grew by on each UTC date ("YYYY-MM-DD"), for `spendByDay`. */
  days: Map<string, number>;
  reservations: Map<string, Reservation>;
  /** What each key's settles charged, for key caps and `keyBalances`. */
  keySpent: Map<string, number>;
  /** The spend-alert thresholds fired this period (`firedMember`). */
  fired: Set<string>;
}

/** What the billing half of the memory store shares with the rest of it. */
export interface MemoryBillingDeps {
  accounts: ReadonlyMap<string, AccountRecord>;
  keys: ReadonlyMap<string, ApiKeyRecord>;
  /** Closes an id (`closeId`), or tells how it closed. */
  closed: {
    get(reservation: ReservationRef): CallOutcome | undefined;
    close(reservation: ReservationRef, outcome: CallOutcome): void;
  };
  /** The store's own clock, for a release that gives no `nowMs`. */
  clock: () => number;
  /** Rate-limit states are swept once there are this many (see `RATE_SWEEP_MIN`). */
  rateSweepMin: number;
  /** Keeps a completed call's usage record, written in its settle's step. */
  recordUsage(record: UsageRecordRow): void;
  /** Queues the spend alerts a settle raised, in its step. */
  raiseAlerts(alerts: readonly SpendAlert[]): void;
}

/** The billing methods of the memory store, and how many rate-limit states it keeps. */
export type MemoryBilling = Pick<
  Store,
  "chargeRateLimit" | "extendReservation" | "settle" | "release" | "balance" | "keyBalances" | "spendByDay"
> & { rateLimitStates(): number };

const emptyPeriod = (): PeriodState => ({
  spent: 0,
  days: new Map(),
  reservations: new Map(),
  keySpent: new Map(),
  fired: new Set(),
});

/** The alerts of a settle (`SettleRequest.alertPercents`): its account's cap, then its key's own. */
function alertsOf(request: SettleRequest, state: PeriodState, scopes: ScopeSpend[]): SpendAlert[] {
  const percents = request.alertPercents ?? [];
  const base = { accountId: request.accountId, period: request.period, timeMs: request.nowMs };
  const fire = (member: string) => !state.fired.has(member) && Boolean(state.fired.add(member));
  const newId = () => `evt_${randomUUID().replaceAll("-", "")}`;
  return scopes.flatMap((scope) => raiseAlerts(base, percents, scope, fire, newId));
}

const sum = (values: Iterable<number>) => {
  let total = 0;
  for (const v of values) total += v;
  return total;
};

/**
 * Holds, charges and rate limits of the memory store, each method synchronous at heart so that it is
 * one atomic step, as a Lua script is on Redis: an account's cap and a key's own cap are checked and a
 * hold counted against both at once, and a key's token budget is charged with its hold.
 */
export function createMemoryBilling(deps: MemoryBillingDeps): MemoryBilling {
  const { accounts, keys, closed } = deps;
  /** GCRA theoretical arrival time per key id, for request rates and for token budgets. */
  const tats = new Map<string, number>();
  const tokenTats = new Map<string, number>();
  let rateSweepAt = deps.rateSweepMin;
  const periods = new Map<string, PeriodState>();

  const periodKey = (accountId: string, period: string) => `${accountId}|${period}`;
  const periodState = (accountId: string, period: string): PeriodState => {
    const id = periodKey(accountId, period);
    let state = periods.get(id);
    if (!state) {
      state = emptyPeriod();
      periods.set(id, state);
    }
    return state;
  };

  /** Drops rate-limit states whose time has passed: GCRA treats them exactly as absent ones. */
  const sweepRateLimits = (nowMs: number) => {
    if (tats.size + tokenTats.size < rateSweepAt) return;
    for (const map of [tats, tokenTats]) for (const [id, tat] of map) if (tat <= nowMs) map.delete(id);
    rateSweepAt = Math.max(deps.rateSweepMin, 2 * (tats.size + tokenTats.size));
  };

  /** Drops the expired reservations of a period: a crashed call's hold frees itself. */
  const dropExpired = (state: PeriodState | undefined, nowMs: number) => {
    for (const [id, r] of state?.reservations ?? []) if (r.expiresAtMs <= nowMs) state?.reservations.delete(id);
  };
  /** What the holds of a period (of one key, when given) add up to. */
  const held = (state: PeriodState | undefined, apiKeyId?: string) =>
    sum(
      [...(state?.reservations.values() ?? [])]
        .filter((r) => apiKeyId === undefined || r.apiKeyId === apiKeyId)
        .map((r) => r.amount),
    );
  /** When the soonest hold other than `id` (of one key, when given) expires. */
  const soonestOther = (state: PeriodState, id: string, apiKeyId?: string) => {
    let soonest = Number.POSITIVE_INFINITY;
    for (const [other, r] of state.reservations) {
      if (other !== id && (apiKeyId === undefined || r.apiKeyId === apiKeyId))
        soonest = Math.min(soonest, r.expiresAtMs);
    }
    return soonest;
  };

  /**
   * The answer to a request `reserve` refused, for each cap that is short of `minimum`: lasting when
   * that cap less its spend and the call's own hold would not cover it (the account's first), else
   * temporary (`Grant.heldByOthersMs`), with the wait for the soonest other hold that each short cap
   * counts (the longer of the two when both are short).
   */
  const refusal = (request: ReserveRequest, state: PeriodState, nowMs: number, caps: CapRoom): Grant => {
    const { minimum, maximum, reservationId: id } = request;
    const own = state.reservations.get(id)?.amount ?? 0;
    const accountShort = Math.min(maximum, caps.accountLeft) < minimum;
    const keyShort = Math.min(maximum, caps.keyLeft) < minimum;
    if (accountShort && Math.min(maximum, caps.accountLeftBySpend - own) < minimum) return { granted: 0 };
    if (keyShort && Math.min(maximum, caps.keyLeftBySpend - own) < minimum) return { granted: 0, byKeyCap: true };
    const lasting: Grant = accountShort ? { granted: 0 } : { granted: 0, byKeyCap: true };
    const soonest = Math.max(
      accountShort ? soonestOther(state, id) : 0,
      keyShort ? soonestOther(state, id, request.apiKeyId) : 0,
    );
    // A short cap with no other hold is short by its spend alone (a hold of another key or none).
    if (!Number.isFinite(soonest)) return lasting;
    return { ...lasting, heldByOthersMs: Math.max(1, Math.ceil(soonest - nowMs)) };
  };

  /** What the account's cap and the key's own cap leave, with and without the holds. */
  interface CapRoom {
    accountLeft: number;
    accountLeftBySpend: number;
    keyLeft: number;
    keyLeftBySpend: number;
  }
  const capRoom = (
    request: Pick<ReservationRef, "accountId" | "apiKeyId">,
    state: PeriodState | undefined,
  ): CapRoom => {
    const cap = accounts.get(request.accountId)?.spendCapUsdMicros ?? 0;
    const spent = state?.spent ?? 0;
    const keyCap = request.apiKeyId === undefined ? undefined : keys.get(request.apiKeyId)?.spendCapUsdMicros;
    const keySpent = request.apiKeyId === undefined ? 0 : (state?.keySpent.get(request.apiKeyId) ?? 0);
    const none = Number.POSITIVE_INFINITY;
    return {
      accountLeft: cap - spent - held(state),
      accountLeftBySpend: cap - spent,
      keyLeft: keyCap === undefined ? none : keyCap - keySpent - held(state, request.apiKeyId),
      keyLeftBySpend: keyCap === undefined ? none : keyCap - keySpent,
    };
  };

  /** The logic of `Store.extendReservation`, synchronous so `chargeRateLimit` runs it in the same step. */
  const reserve = (request: ReserveRequest, nowMs: number, tokens?: TokenTake): Grant => {
    if (closed.get(request)) return { granted: 0 };
    const state = periods.get(periodKey(request.accountId, request.period));
    dropExpired(state, nowMs);
    const existing = state?.reservations.get(request.reservationId);
    if (request.maximum === 0) {
      // A renewal: it keeps a live hold alive and never brings back a released or expired one.
      if (existing) existing.expiresAtMs = nowMs + request.ttlMs;
      return { granted: 0 };
    }
    const caps = capRoom(request, state);
    // Never negative: a cap lowered below what is held refuses growth but still renews.
    const granted = Math.max(0, Math.min(request.maximum, caps.accountLeft, caps.keyLeft));
    if (granted < request.minimum) return refusal(request, state ?? emptyPeriod(), nowMs, caps);
    periodState(request.accountId, request.period).reservations.set(request.reservationId, {
      amount: (existing?.amount ?? 0) + granted,
      expiresAtMs: nowMs + request.ttlMs,
      // A hold keeps the key and the token take it was first taken with.
      ...((existing?.apiKeyId ?? request.apiKeyId) !== undefined && {
        apiKeyId: existing?.apiKeyId ?? request.apiKeyId,
      }),
      ...((existing?.tokens ?? tokens) && { tokens: existing?.tokens ?? tokens }),
    });
    return { granted };
  };

  /** Takes a hold out of its period, giving back `unused` of the tokens it took (all of them: undefined). */
  const dropHold = (reservation: ReservationRef, nowMs: number, used?: number) => {
    const state = periods.get(periodKey(reservation.accountId, reservation.period));
    const hold = state?.reservations.get(reservation.reservationId);
    state?.reservations.delete(reservation.reservationId);
    const take = hold?.tokens;
    const tat = hold?.apiKeyId === undefined ? undefined : tokenTats.get(hold.apiKeyId);
    if (!take || tat === undefined || hold?.apiKeyId === undefined) return;
    const unused = used === undefined ? take.count : Math.max(0, take.count - used);
    tokenTats.set(hold.apiKeyId, tat - tokenGiveBackMs(unused, take.msPerToken, take.tatAfterMs, nowMs));
  };

  return {
    async chargeRateLimit({ key, nowMs, reserve: reservation, tokens }): Promise<RateCharge> {
      sweepRateLimits(nowMs);
      const { decision, tatMs } = gcra(tats.get(key.id), key.rateLimitRps, key.burst, nowMs);
      const tpm = tokens === undefined ? undefined : key.tokensPerMinute;
      const budget = (cost: number) =>
        tpm === undefined ? undefined : tokenStep(tokenTats.get(key.id), tpm, cost, nowMs);
      const answer = (grant: Grant, step = budget(0)): RateCharge => ({
        ...decision,
        ...grant,
        ...(step && { tokens: step.decision }),
      });
      if (!decision.allowed) return answer({ granted: 0 });
      if (tatMs !== undefined) tats.set(key.id, tatMs);
      if (!reservation) return answer({ granted: 0 });
      const attempt = tokens ? budget(tokens) : undefined;
      if (attempt && !attempt.decision.allowed) return answer({ granted: 0 }, attempt);
      const take =
        attempt?.tatMs === undefined
          ? undefined
          : { count: attempt.taken, msPerToken: attempt.msPerToken, tatAfterMs: attempt.tatMs };
      // The hold is the charged key's, as the Redis script has it.
      const grant = reserve({ ...reservation, apiKeyId: key.id }, nowMs, take);
      if (grant.granted === 0 || !take) return answer(grant);
      tokenTats.set(key.id, take.tatAfterMs);
      return answer(grant, attempt);
    },
    extendReservation: async (request) => reserve(request, request.nowMs),
    async settle(request) {
      const done = closed.get(request);
      if (done) return done;
      closed.close(request, "settled");
      dropHold(request, request.nowMs, request.usedTokens ?? Number.POSITIVE_INFINITY);
      const state = periodState(request.accountId, request.period);
      // Never past either cap, even for a call whose hold expired while it ran.
      const room = capRoom(request, state);
      const charge = Math.max(0, Math.min(request.chargeUsdMicros, room.accountLeft, room.keyLeft));
      const keyId = request.apiKeyId;
      if (keyId !== undefined && charge > 0) state.keySpent.set(keyId, (state.keySpent.get(keyId) ?? 0) + charge);
      state.spent += charge;
      if (charge > 0) {
        const day = dayInPeriod(request.nowMs, request.period);
        state.days.set(day, (state.days.get(day) ?? 0) + charge);
      }
      if (request.record) deps.recordUsage({ ...request.record, costUsdMicros: charge });
      const account = { cap: accounts.get(request.accountId)?.spendCapUsdMicros, spent: state.spent };
      const key =
        keyId === undefined
          ? []
          : [{ apiKeyId: keyId, cap: keys.get(keyId)?.spendCapUsdMicros, spent: state.keySpent.get(keyId) ?? 0 }];
      deps.raiseAlerts(alertsOf(request, state, [account, ...key]));
      return "settled";
    },
    async release(reservation) {
      const done = closed.get(reservation);
      if (done) return done;
      closed.close(reservation, "released");
      dropHold(reservation, reservation.nowMs ?? deps.clock());
      return "released";
    },
    async balance({ accountId, period, nowMs }): Promise<Balance> {
      const state = periods.get(periodKey(accountId, period));
      dropExpired(state, nowMs);
      return { spentUsdMicros: state?.spent ?? 0, reservedUsdMicros: held(state) };
    },
    async keyBalances({ accountId, period, nowMs }) {
      const state = periods.get(periodKey(accountId, period));
      dropExpired(state, nowMs);
      const out = new Map<string, Balance>();
      for (const [id, spent] of state?.keySpent ?? []) out.set(id, { spentUsdMicros: spent, reservedUsdMicros: 0 });
      for (const r of state?.reservations.values() ?? []) {
        if (r.apiKeyId === undefined) continue;
        const b = out.get(r.apiKeyId) ?? { spentUsdMicros: 0, reservedUsdMicros: 0 };
        out.set(r.apiKeyId, { ...b, reservedUsdMicros: b.reservedUsdMicros + r.amount });
      }
      return out;
    },
    async spendByDay({ accountId, period }) {
      return daySpends(periods.get(periodKey(accountId, period))?.days ?? []);
    },
    rateLimitStates: () => tats.size + tokenTats.size,
  };
}
