import type { RedisClient } from "./client.ts";
import type { AccountRecord, ApiKeyRecord, RateCharge, Store, UsagePage, UsageRecordRow } from "../store.ts";
import { daySpends, periodBounds } from "../days.ts";
import { normalizeEmail } from "../email.ts";
import { createTtlCache } from "./cache.ts";
import { DEFAULT_COMMAND_TIMEOUT_MS, guarded as guardedWithin } from "./client.ts";
import { backfillEmailIndex, type EmailBackfill } from "./email-index.ts";
import { createKeys } from "./keys.ts";
import { decodeStreamToken, encodeStreamToken } from "./stream-token.ts";
import { accountFields, apiKeyFields, parseAccount, parseApiKey, parseUsage, usageFields } from "./records.ts";
import { BALANCE, CHARGE_RATE_LIMIT, createScript, RELEASE, RESERVE, SETTLE, UPDATE_IF_EXISTS } from "./scripts.ts";

export interface RedisStoreOptions {
  /** A connected client for commands. */
  redis: RedisClient;
  /** A second connection for invalidation messages; without it only TTLs expire cached entries. */
  subscriber?: RedisClient;
  prefix?: string;
  /** How long cached keys and accounts live: changes elsewhere show within this time. */
  cacheTtlMs?: number;
  /**
   * Whether the scripts read the Redis server's clock (the default) and ignore the callers'
   * `nowMs`, so processes with skewed clocks agree on rates and expiries. Tests that drive
   * time by hand turn it off.
   */
  serverTime?: boolean;
  /** How long a caller waits for an answer before the store fails with 503 (`SLUICE_STORE_TIMEOUT_MS`). */
  commandTimeoutMs?: number;
  /**
   * Whether the store starts the one-time email index backfill (`backfillEmailIndex`) in the
   * background; default true. Tests of the backfill itself turn it off to run it by hand.
   */
  backfillEmailIndex?: boolean;
}

/** The Redis store, with the background email index backfill it started. */
export interface RedisStore extends Store {
  /**
   * How the backfill this store started ended (it never rejects); `skipped` when
   * `backfillEmailIndex` was off.
   */
  emailIndexBackfill: Promise<EmailBackfill>;
}

/**
 * How long settled and released ids (and spend-cap aborts' charges by id) are kept after a
 * period's last one, so a retried or late command finds its call closed: a stalled server may
 * run queued commands long after they were sent, and operators check ledgers call by call.
 */
const SETTLED_KEEP_SECONDS = 70 * 24 * 3600;

const scripts = {
  chargeRateLimit: createScript(CHARGE_RATE_LIMIT),
  reserve: createScript(RESERVE),
  settle: createScript(SETTLE),
  release: createScript(RELEASE),
  balance: createScript(BALANCE),
  updateIfExists: createScript(UPDATE_IF_EXISTS),
};

const num = (value: unknown): number => Number(value ?? 0);
/** Cached records are shared; callers get their own copy to change. */
const copy = <T extends object>(value: T | undefined): T | undefined => (value ? { ...value } : undefined);

/**
 * The shared store: any number of Sluice processes on any number of machines share accounts,
 * keys, rate limits, holds, spend and usage records through one Redis (or Cluster). Each
 * billing phase is one Lua script, so the billing invariants hold at every instant.
 *
 * Making the store starts the one-time email index backfill (`backfillEmailIndex`) and does not
 * wait for it, so start-up and readiness never wait on a walk of the whole database: once a
 * database has been backfilled a start costs one EXISTS, and on the first start of a version
 * with the index, accounts created earlier show in `findAccountsByEmail` when the pass ends.
 */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const { redis } = options;
  const timeoutMs = options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const guarded = <T>(operation: () => Promise<T>) => guardedWithin(operation, timeoutMs);
  const keys = createKeys(options.prefix ?? "sluice");
  const ttl = options.cacheTtlMs ?? 1000;
  const serverTime = options.serverTime ?? true;
  /** The "now" a script gets: empty makes it read the server's clock. */
  const now = (nowMs: number): string | number => (serverTime ? "" : nowMs);
  const keyCache = createTtlCache<ApiKeyRecord | undefined>(ttl, 50_000);
  const accountCache = createTtlCache<AccountRecord | undefined>(ttl, 50_000);

  const invalidate = async (message: string) => {
    if (message.startsWith("k:")) keyCache.delete(message.slice(2));
    if (message.startsWith("a:")) accountCache.delete(message.slice(2));
    await redis.publish(keys.invalidations, message).catch(() => undefined);
  };
  if (options.subscriber) {
    const sub = options.subscriber;
    sub.subscribe(keys.invalidations).catch(() => undefined);
    sub.on("message", (_channel: string, message: string) => {
      if (message.startsWith("k:")) keyCache.delete(message.slice(2));
      if (message.startsWith("a:")) accountCache.delete(message.slice(2));
    });
  }

  /** The keys of the reserve logic, in the order the Lua `reserve` function reads them. */
  const reserveKeys = (accountId: string, period: string) => {
    const p = keys.period(accountId, period);
    return [keys.account(accountId), p.spent, p.reservations, p.expiries, p.reserved, p.settled, p.released];
  };

  const loadAccount = async (id: string) => parseAccount(id, await redis.hgetall(keys.account(id)));
  const loadKey = async (accountId: string, keyId: string) =>
    parseApiKey(keyId, await redis.hgetall(keys.apiKey(accountId, keyId)));

  const emailIndexBackfill: Promise<EmailBackfill> =
    options.backfillEmailIndex === false ? Promise.resolve({ outcome: "skipped" }) : backfillEmailIndex(redis, keys);

  return {
    emailIndexBackfill,
    createAccount: (account) =>
      guarded(async () => {
        // The index entry first (another slot, so not one atomic step): a create cut short may
        // leave an entry for no account, which lookups skip, but never an account it misses.
        if (account.email !== undefined)
          await redis.sadd(keys.accountsByEmail(normalizeEmail(account.email)), account.id);
        await redis.hset(keys.account(account.id), accountFields(account));
        await redis.incr(keys.accountCount);
      }),
    getAccount: (accountId) =>
      guarded(async () => copy(await accountCache.get(accountId, () => loadAccount(accountId)))),
    updateAccount: ({ accountId, patch }) =>
      guarded(async () => {
        const fields = Object.entries(accountFields(patch)).flat();
        const found = await scripts.updateIfExists.run(redis, [keys.account(accountId)], fields);
        if (num(found) === 0) return undefined;
        await invalidate(`a:${accountId}`);
        return loadAccount(accountId);
      }),
    hasAccounts: () => guarded(async () => num(await redis.get(keys.accountCount)) > 0),
    findAccountsByEmail: (email) =>
      guarded(async () => {
        const ids = await redis.smembers(keys.accountsByEmail(normalizeEmail(email)));
        const found = await Promise.all(ids.map(loadAccount));
        return found.filter((a): a is AccountRecord => a !== undefined);
      }),

    createApiKey: (key) =>
      guarded(async () => {
        await redis.hset(keys.apiKey(key.accountId, key.id), apiKeyFields(key));
        await redis.sadd(keys.accountKeys(key.accountId), key.id);
        await redis.set(keys.keyById(key.id), key.accountId);
        await redis.set(keys.keyByHash(key.hash), `${key.accountId} ${key.id}`);
        await invalidate(`k:${key.hash}`);
      }),
    findApiKeyByHash: (hash) =>
      guarded(async () =>
        copy(
          await keyCache.get(hash, async () => {
            const location = await redis.get(keys.keyByHash(hash));
            const [accountId, keyId] = location?.split(" ") ?? [];
            return accountId && keyId ? loadKey(accountId, keyId) : undefined;
          }),
        ),
      ),
    revokeApiKey: (apiKeyId) =>
      guarded(async () => {
        const accountId = await redis.get(keys.keyById(apiKeyId));
        if (!accountId) return undefined;
        const found = await scripts.updateIfExists.run(redis, [keys.apiKey(accountId, apiKeyId)], ["revoked", "1"]);
        if (num(found) === 0) return undefined;
        const key = await loadKey(accountId, apiKeyId);
        if (key) await invalidate(`k:${key.hash}`);
        return key;
      }),
    listApiKeys: (accountId) =>
      guarded(async () => {
        const ids = await redis.smembers(keys.accountKeys(accountId));
        const found = await Promise.all(ids.map((id) => loadKey(accountId, id)));
        return found.filter((k): k is ApiKeyRecord => k !== undefined);
      }),

    chargeRateLimit: ({ key, nowMs, reserve }) =>
      guarded(async (): Promise<RateCharge> => {
        const gcra = [keys.gcra(key.accountId, key.id)];
        const args: Array<string | number> = [1000 / key.rateLimitRps, key.burst, now(nowMs)];
        if (reserve) {
          gcra.push(...reserveKeys(reserve.accountId, reserve.period));
          args.push(reserve.reservationId, reserve.minimum, reserve.maximum, reserve.ttlMs);
        }
        const r = (await scripts.chargeRateLimit.run(redis, gcra, args)) as number[];
        return {
          allowed: r[0] === 1,
          limit: num(r[1]),
          remaining: num(r[2]),
          resetMs: num(r[3]),
          retryAfterMs: num(r[4]),
          granted: num(r[5]),
        };
      }),
    extendReservation: (request) =>
      guarded(async () => {
        const granted = await scripts.reserve.run(redis, reserveKeys(request.accountId, request.period), [
          request.reservationId,
          request.minimum,
          request.maximum,
          request.ttlMs,
          now(request.nowMs),
        ]);
        return num(granted);
      }),
    settle: (request) =>
      guarded(async () => {
        const p = keys.period(request.accountId, request.period);
        const bounds = periodBounds(request.period);
        const charged = await scripts.settle.run(
          redis,
          [
            p.spent,
            p.reservations,
            p.expiries,
            p.reserved,
            p.settled,
            keys.usage(request.accountId),
            p.partial,
            keys.account(request.accountId),
            p.released,
            p.partials,
            p.days,
          ],
          [
            request.reservationId,
            request.chargeUsdMicros,
            SETTLED_KEEP_SECONDS,
            now(request.nowMs),
            bounds.first,
            bounds.last,
            ...(request.record ? usageFields(request.record) : []),
          ],
        );
        return num(charged) === -2 ? "released" : "settled";
      }),
    release: ({ accountId, period, reservationId }) =>
      guarded(async () => {
        const p = keys.period(accountId, period);
        const r = await scripts.release.run(
          redis,
          [p.reservations, p.expiries, p.reserved, p.settled, p.released],
          [reservationId, SETTLED_KEEP_SECONDS],
        );
        return num(r) === 2 ? "settled" : "released";
      }),
    balance: ({ accountId, period, nowMs }) =>
      guarded(async () => {
        const p = keys.period(accountId, period);
        const r = (await scripts.balance.run(
          redis,
          [p.spent, p.reservations, p.expiries, p.reserved],
          [now(nowMs)],
        )) as number[];
        return { spentUsdMicros: num(r[0]), reservedUsdMicros: num(r[1]) };
      }),
    spendByDay: ({ accountId, period }) =>
      guarded(async () => {
        const totals = await redis.hgetall(keys.period(accountId, period).days);
        return daySpends(Object.entries(totals).map(([date, spent]) => [date, num(spent)] as const));
      }),

    async listUsageRecords({ accountId, pageSize, pageToken }): Promise<UsagePage> {
      const before = pageToken ? decodeStreamToken(pageToken) : undefined;
      return guarded(async () => {
        const entries = await redis.xrevrange(
          keys.usage(accountId),
          before ? `(${before}` : "+",
          "-",
          "COUNT",
          pageSize + 1,
        );
        const page = entries.slice(0, pageSize);
        const records: UsageRecordRow[] = page.map(([, fields]) => parseUsage(accountId, fields));
        const last = page.at(-1);
        return { records, nextPageToken: entries.length > pageSize && last ? encodeStreamToken(last[0]) : "" };
      });
    },

    ping: () =>
      guarded(async () => {
        await redis.ping();
      }),
    async close() {
      options.subscriber?.disconnect();
      redis.disconnect();
    },
  };
}
