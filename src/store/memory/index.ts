import { dayInPeriod, daySpends } from "../days.ts";
import { normalizeEmail } from "../email.ts";
import { gcra } from "../gcra.ts";
import { decodePageToken, encodePageToken } from "../page-token.ts";
import type {
  AccountRecord,
  ApiKeyRecord,
  Balance,
  CallOutcome,
  RateCharge,
  ReservationRef,
  ReserveRequest,
  Store,
  UsagePage,
  UsageRecordRow,
} from "../store.ts";

interface Reservation {
  amount: number;
  expiresAtMs: number;
}

interface PeriodState {
  spent: number;
  /** What `spent` grew by on each UTC date ("YYYY-MM-DD"), for `spendByDay`. */
  days: Map<string, number>;
  reservations: Map<string, Reservation>;
}

/** A settled or released id, and when (by the store's clock) it was closed. */
interface Closed {
  outcome: CallOutcome;
  atMs: number;
}

export interface MemoryStoreOptions {
  /** The store's own clock, by which closed ids are forgotten (not the callers' `nowMs`). */
  clock?: () => number;
  /** How long a settled or released id is kept after it closed; see `CLOSED_KEEP_MS`. */
  closedKeepMs?: number;
  /** At most this many closed ids are kept, the oldest forgotten first; see `MAX_CLOSED_IDS`. */
  maxClosedIds?: number;
}

/** The memory store, with a look at the state it bounds. */
export interface MemoryStore extends Store {
  /** How many rate-limit states and closed ids the store holds now (for tests and diagnostics). */
  footprint(): { rateLimitKeys: number; closedIds: number };
}

/**
 * How long a settled or released id is kept, so that a repeated or late settle or release finds
 * its call closed. In one process, a command for a closed id can come only from the call's own
 * resolver, which asks for at most its deadline (two minutes) after the call ended; ten minutes
 * leaves a wide margin. (Redis keeps its `settled` and `released` sets 70 days after their last
 * write: a stalled server may run queued commands long after they were sent.)
 */
export const CLOSED_KEEP_MS = 10 * 60_000;

/**
 * A cap on closed ids besides their age, so a flood of calls cannot grow the store without
 * bound: a million is ten minutes of calls at about 1,700 per second, more than one process serves.
 */
export const MAX_CLOSED_IDS = 1_000_000;

/**
 * Rate-limit states are swept once there are this many, and then whenever their number has
 * doubled since the last sweep: amortised O(1) per request, and never more than twice the states
 * still live at the last sweep (or this many) are kept.
 */
export const RATE_SWEEP_MIN = 1_000;

/**
 * The embedded store for one process. JavaScript runs each method to completion before the
 * next, so every method is atomic without locks, which is exactly the guarantee the Redis
 * backend gets from its Lua scripts. It never fails (but for a foreign page token), and what it
 * keeps that could grow with traffic alone is bounded: rate-limit states whose theoretical
 * arrival time has passed (the same as no state) are swept, and closed ids are forgotten after
 * `closedKeepMs` or past `maxClosedIds`, mirroring the expiries of the Redis keys.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const clock = options.clock ?? Date.now;
  const closedKeepMs = options.closedKeepMs ?? CLOSED_KEEP_MS;
  const maxClosedIds = options.maxClosedIds ?? MAX_CLOSED_IDS;
  const accounts = new Map<string, AccountRecord>();
  /** Account ids by normalized email (`normalizeEmail`), for `findAccountsByEmail`. */
  const accountsByEmail = new Map<string, Set<string>>();
  const keys = new Map<string, ApiKeyRecord>();
  const keysByHash = new Map<string, string>();
  /** GCRA theoretical arrival time per key id. */
  const tats = new Map<string, number>();
  let rateSweepAt = RATE_SWEEP_MIN;
  const periods = new Map<string, PeriodState>();
  /** Closed ids by `closedKey`, in the order they closed, so the oldest are at the front. */
  const closed = new Map<string, Closed>();
  const usage = new Map<string, UsageRecordRow[]>();

  const periodKey = (accountId: string, period: string) => `${accountId}|${period}`;
  const closedKey = (r: ReservationRef) => `${periodKey(r.accountId, r.period)}|${r.reservationId}`;
  const periodState = (accountId: string, period: string): PeriodState => {
    const id = periodKey(accountId, period);
    let state = periods.get(id);
    if (!state) {
      state = { spent: 0, days: new Map(), reservations: new Map() };
      periods.set(id, state);
    }
    return state;
  };

  /** Drops rate-limit states whose time has passed: GCRA treats them exactly as absent ones. */
  const sweepRateLimits = (nowMs: number) => {
    if (tats.size < rateSweepAt) return;
    for (const [id, tat] of tats) if (tat <= nowMs) tats.delete(id);
    rateSweepAt = Math.max(RATE_SWEEP_MIN, 2 * tats.size);
  };

  /** Closes an id, first forgetting the ids closed too long ago or past the cap. */
  const close = (reservation: ReservationRef, outcome: CallOutcome) => {
    const now = clock();
    for (const [id, entry] of closed) {
      if (entry.atMs + closedKeepMs > now && closed.size < maxClosedIds) break;
      closed.delete(id);
    }
    closed.set(closedKey(reservation), { outcome, atMs: now });
  };

  /** Sums live reservations, dropping the expired ones: a crashed call's hold frees itself. */
  const liveReserved = (state: PeriodState | undefined, nowMs: number): number => {
    if (!state) return 0;
    let total = 0;
    for (const [id, r] of state.reservations) {
      if (r.expiresAtMs <= nowMs) state.reservations.delete(id);
      else total += r.amount;
    }
    return total;
  };

  /** The logic of `Store.extendReservation`, synchronous so `chargeRateLimit` runs it in the same step. */
  const reserve = (request: ReserveRequest, nowMs: number): number => {
    if (closed.has(closedKey(request))) return 0;
    const cap = accounts.get(request.accountId)?.spendCapUsdMicros ?? 0;
    const state = periods.get(periodKey(request.accountId, request.period));
    const left = cap - (state?.spent ?? 0) - liveReserved(state, nowMs);
    const existing = state?.reservations.get(request.reservationId);
    if (request.maximum === 0) {
      // A renewal: it keeps a live hold alive and never brings back a released or expired one.
      if (existing) existing.expiresAtMs = nowMs + request.ttlMs;
      return 0;
    }
    // Never negative: a cap lowered below what is held refuses growth but still renews.
    const granted = Math.max(0, Math.min(request.maximum, left));
    if (granted < request.minimum) return 0;
    periodState(request.accountId, request.period).reservations.set(request.reservationId, {
      amount: (existing?.amount ?? 0) + granted,
      expiresAtMs: nowMs + request.ttlMs,
    });
    return granted;
  };

  const copy = <T extends object>(value: T | undefined): T | undefined => (value ? { ...value } : undefined);

  return {
    async createAccount(account) {
      accounts.set(account.id, { ...account });
      if (account.email === undefined) return;
      const email = normalizeEmail(account.email);
      accountsByEmail.set(email, (accountsByEmail.get(email) ?? new Set()).add(account.id));
    },
    async getAccount(accountId) {
      return copy(accounts.get(accountId));
    },
    async updateAccount({ accountId, patch }) {
      const account = accounts.get(accountId);
      if (!account) return undefined;
      Object.assign(account, Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)));
      return { ...account };
    },
    async hasAccounts() {
      return accounts.size > 0;
    },
    async findAccountsByEmail(email) {
      const ids = [...(accountsByEmail.get(normalizeEmail(email)) ?? [])];
      return ids.map((id) => copy(accounts.get(id))).filter((a): a is AccountRecord => a !== undefined);
    },

    async createApiKey(key) {
      keys.set(key.id, { ...key });
      keysByHash.set(key.hash, key.id);
    },
    async findApiKeyByHash(hash) {
      const id = keysByHash.get(hash);
      return id === undefined ? undefined : copy(keys.get(id));
    },
    async revokeApiKey(apiKeyId) {
      const key = keys.get(apiKeyId);
      if (!key) return undefined;
      key.revoked = true;
      return { ...key };
    },
    async listApiKeys(accountId) {
      return [...keys.values()].filter((k) => k.accountId === accountId).map((k) => ({ ...k }));
    },

    async chargeRateLimit({ key, nowMs, reserve: reservation }): Promise<RateCharge> {
      sweepRateLimits(nowMs);
      const { decision, tatMs } = gcra(tats.get(key.id), key.rateLimitRps, key.burst, nowMs);
      if (tatMs !== undefined) tats.set(key.id, tatMs);
      const granted = decision.allowed && reservation ? reserve(reservation, nowMs) : 0;
      return { ...decision, granted };
    },
    extendReservation: async (request) => reserve(request, request.nowMs),
    async settle(request) {
      const done = closed.get(closedKey(request));
      if (done) return done.outcome;
      close(request, "settled");
      const state = periodState(request.accountId, request.period);
      state.reservations.delete(request.reservationId);
      // Never past the cap, even for a call whose hold expired while it ran.
      const cap = accounts.get(request.accountId)?.spendCapUsdMicros ?? 0;
      let others = 0;
      for (const r of state.reservations.values()) others += r.amount;
      const charge = Math.max(0, Math.min(request.chargeUsdMicros, cap - state.spent - others));
      state.spent += charge;
      if (charge > 0) {
        const day = dayInPeriod(request.nowMs, request.period);
        state.days.set(day, (state.days.get(day) ?? 0) + charge);
      }
      if (request.record) {
        const list = usage.get(request.accountId) ?? [];
        list.push({ ...request.record, costUsdMicros: charge });
        usage.set(request.accountId, list);
      }
      return "settled";
    },
    async release(reservation) {
      const done = closed.get(closedKey(reservation));
      if (done) return done.outcome;
      close(reservation, "released");
      periods.get(periodKey(reservation.accountId, reservation.period))?.reservations.delete(reservation.reservationId);
      return "released";
    },
    async balance({ accountId, period, nowMs }): Promise<Balance> {
      const state = periods.get(periodKey(accountId, period));
      return { spentUsdMicros: state?.spent ?? 0, reservedUsdMicros: liveReserved(state, nowMs) };
    },
    async spendByDay({ accountId, period }) {
      return daySpends(periods.get(periodKey(accountId, period))?.days ?? []);
    },

    async listUsageRecords({ accountId, pageSize, pageToken }): Promise<UsagePage> {
      const list = usage.get(accountId) ?? [];
      const end = pageToken ? Math.min(decodePageToken(pageToken), list.length) : list.length;
      const start = Math.max(0, end - pageSize);
      const records = list
        .slice(start, end)
        .reverse()
        .map((r) => ({ ...r }));
      return { records, nextPageToken: start > 0 ? encodePageToken(start) : "" };
    },

    async ping() {},
    async close() {},
    footprint: () => ({ rateLimitKeys: tats.size, closedIds: closed.size }),
  };
}
