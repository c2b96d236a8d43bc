import { gcra } from "../gcra.ts";
import type {
  AccountPatch,
  AccountRecord,
  Admission,
  ApiKeyRecord,
  Balance,
  CallOutcome,
  ReserveRequest,
  SettleRequest,
  Store,
  UsagePage,
  UsageRecordRow,
} from "../store.ts";
import { decodePageToken, encodePageToken } from "../page-token.ts";

interface Reservation {
  amount: number;
  expiresAtMs: number;
}

interface PeriodState {
  spent: number;
  reservations: Map<string, Reservation>;
  /** Ids already settled or released: a retried settle charges once, a late one never. */
  closed: Map<string, CallOutcome>;
}

/**
 * The embedded store for one process. JavaScript runs each method to completion before the
 * next, so every method is atomic without locks, which is exactly the guarantee the Redis
 * backend gets from its Lua scripts.
 */
export function createMemoryStore(): Store {
  const accounts = new Map<string, AccountRecord>();
  const keys = new Map<string, ApiKeyRecord>();
  const keysByHash = new Map<string, string>();
  const tats = new Map<string, number>();
  const periods = new Map<string, PeriodState>();
  const usage = new Map<string, UsageRecordRow[]>();

  const periodState = (accountId: string, period: string): PeriodState => {
    const id = `${accountId}|${period}`;
    let state = periods.get(id);
    if (!state) {
      state = { spent: 0, reservations: new Map(), closed: new Map() };
      periods.set(id, state);
    }
    return state;
  };

  /** Sums live reservations, dropping the expired ones: a crashed call's hold frees itself. */
  const liveReserved = (state: PeriodState, nowMs: number): number => {
    let total = 0;
    for (const [id, r] of state.reservations) {
      if (r.expiresAtMs <= nowMs) state.reservations.delete(id);
      else total += r.amount;
    }
    return total;
  };

  /** The hold logic of `Store.reserve`, synchronous so `admit` can run it in the same step. */
  const reserve = (request: ReserveRequest): number => {
    const cap = accounts.get(request.accountId)?.spendCapUsdMicros ?? 0;
    const state = periodState(request.accountId, request.period);
    const left = cap - state.spent - liveReserved(state, request.nowMs);
    const existing = state.reservations.get(request.reservationId);
    if (state.closed.has(request.reservationId)) return 0;
    if (request.maximum === 0) {
      // A renewal: it keeps a live hold alive and never brings back a released or expired one.
      if (existing) existing.expiresAtMs = request.nowMs + request.ttlMs;
      return 0;
    }
    // Never negative: a cap lowered below what is held refuses growth but still renews.
    const granted = Math.max(0, Math.min(request.maximum, left));
    if (granted < request.minimum) return 0;
    state.reservations.set(request.reservationId, {
      amount: (existing?.amount ?? 0) + granted,
      expiresAtMs: request.nowMs + request.ttlMs,
    });
    return granted;
  };

  const copy = <T extends object>(value: T | undefined): T | undefined => (value ? { ...value } : undefined);

  return {
    async createAccount(account) {
      accounts.set(account.id, { ...account });
    },
    async getAccount(id) {
      return copy(accounts.get(id));
    },
    async updateAccount(id, patch: AccountPatch) {
      const account = accounts.get(id);
      if (!account) return undefined;
      Object.assign(account, Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)));
      return { ...account };
    },
    async countAccounts() {
      return accounts.size;
    },

    async createApiKey(key) {
      keys.set(key.id, { ...key });
      keysByHash.set(key.hash, key.id);
    },
    async getApiKey(id) {
      return copy(keys.get(id));
    },
    async findApiKeyByHash(hash) {
      const id = keysByHash.get(hash);
      return id === undefined ? undefined : copy(keys.get(id));
    },
    async revokeApiKey(id) {
      const key = keys.get(id);
      if (!key) return undefined;
      key.revoked = true;
      return { ...key };
    },
    async listApiKeys(accountId) {
      return [...keys.values()].filter((k) => k.accountId === accountId).map((k) => ({ ...k }));
    },

    async admit(key, nowMs, reservation): Promise<Admission> {
      const { decision, tatMs } = gcra(tats.get(key.id), key.rateLimitRps, key.burst, nowMs);
      if (tatMs !== undefined) tats.set(key.id, tatMs);
      const granted = decision.allowed && reservation ? reserve(reservation) : 0;
      return { ...decision, granted };
    },

    async balance(accountId, period, nowMs): Promise<Balance> {
      const state = periodState(accountId, period);
      return { spentUsdMicros: state.spent, reservedUsdMicros: liveReserved(state, nowMs) };
    },
    reserve: async (request) => reserve(request),
    async settle(request: SettleRequest) {
      const state = periodState(request.accountId, request.period);
      const closed = state.closed.get(request.reservationId);
      if (closed) return closed;
      state.closed.set(request.reservationId, "settled");
      state.reservations.delete(request.reservationId);
      // Never past the cap, even for a call whose hold expired while it ran.
      const cap = accounts.get(request.accountId)?.spendCapUsdMicros ?? 0;
      let others = 0;
      for (const r of state.reservations.values()) others += r.amount;
      const charge = Math.max(0, Math.min(request.chargeUsdMicros, cap - state.spent - others));
      state.spent += charge;
      if (request.record) {
        const list = usage.get(request.accountId) ?? [];
        list.push({ ...request.record, costUsdMicros: charge });
        usage.set(request.accountId, list);
      }
      return "settled";
    },
    async release(accountId, period, reservationId) {
      const state = periodState(accountId, period);
      const closed = state.closed.get(reservationId);
      if (closed) return closed;
      state.closed.set(reservationId, "released");
      state.reservations.delete(reservationId);
      return "released";
    },

    async listUsageRecords(accountId, pageSize, pageToken): Promise<UsagePage> {
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
  };
}
