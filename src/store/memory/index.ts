import { normalizeEmail } from "../email.ts";
import { decodePageToken, encodePageToken } from "../page-token.ts";
import type {
  AccountRecord,
  ApiKeyRecord,
  CallOutcome,
  ReservationRef,
  Store,
  UsagePage,
  UsageRecordRow,
} from "../store.ts";
import { createMemoryBilling } from "./billing.ts";
import { createMemoryWebhooks } from "./webhooks.ts";

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
const MAX_CLOSED_IDS = 1_000_000;

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
  /** Closed ids by `closedKey`, in the order they closed, so the oldest are at the front. */
  const closed = new Map<string, Closed>();
  const usage = new Map<string, UsageRecordRow[]>();

  const closedKey = (r: ReservationRef) => `${r.accountId}|${r.period}|${r.reservationId}`;

  /** Closes an id, first forgetting the ids closed too long ago or past the cap. */
  const close = (reservation: ReservationRef, outcome: CallOutcome) => {
    const now = clock();
    for (const [id, entry] of closed) {
      if (entry.atMs + closedKeepMs > now && closed.size < maxClosedIds) break;
      closed.delete(id);
    }
    closed.set(closedKey(reservation), { outcome, atMs: now });
  };

  const webhooks = createMemoryWebhooks();
  const billing = createMemoryBilling({
    accounts,
    keys,
    closed: { get: (r) => closed.get(closedKey(r))?.outcome, close },
    clock,
    rateSweepMin: RATE_SWEEP_MIN,
    recordUsage(record) {
      const list = usage.get(record.accountId) ?? [];
      list.push(record);
      usage.set(record.accountId, list);
    },
    raiseAlerts: webhooks.enqueue,
  });

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
      if (key.previous) keysByHash.set(key.previous.hash, key.id);
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
    async updateApiKey({ apiKeyId, patch }) {
      const key = keys.get(apiKeyId);
      if (!key) return undefined;
      for (const field of ["spendCapUsdMicros", "tokensPerMinute"] as const) {
        const value = patch[field];
        if (value === null) delete key[field];
        else if (value !== undefined) key[field] = value;
      }
      return { ...key };
    },
    async rotateApiKey({ apiKeyId, hash, prefix, gracePeriodMs, expireTimeMs, nowMs }) {
      const key = keys.get(apiKeyId);
      if (!key) return undefined;
      const expired = expireTimeMs === undefined && key.expireTimeMs !== undefined && key.expireTimeMs <= nowMs;
      if (key.revoked || expired) return { outcome: key.revoked ? "revoked" : "expired", key: { ...key } };
      // One step, so every reader finds one of the two secrets working: the new one at once.
      if (key.previous) keysByHash.delete(key.previous.hash);
      key.previous = { hash: key.hash, prefix: key.prefix, expireTimeMs: nowMs + gracePeriodMs };
      Object.assign(key, { hash, prefix }, expireTimeMs !== undefined && { expireTimeMs });
      keysByHash.set(hash, apiKeyId);
      return { outcome: "rotated", key: { ...key } };
    },
    async listApiKeys(accountId) {
      return [...keys.values()].filter((k) => k.accountId === accountId).map((k) => ({ ...k }));
    },

    chargeRateLimit: billing.chargeRateLimit,
    extendReservation: billing.extendReservation,
    settle: billing.settle,
    release: billing.release,
    balance: billing.balance,
    keyBalances: billing.keyBalances,
    spendByDay: billing.spendByDay,

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

    webhooks,

    async ping() {},
    async close() {},
    footprint: () => ({ rateLimitKeys: billing.rateLimitStates(), closedIds: closed.size }),
  };
}
