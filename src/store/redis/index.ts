import type { RedisClient } from "./client.ts";
import type { AccountRecord, ApiKeyRecord, Store, UsagePage, UsageRecordRow } from "../store.ts";
import { normalizeEmail } from "../email.ts";
import { createRedisApiKeys } from "./api-keys.ts";
import { createRedisBilling } from "./billing.ts";
import { copy, createTtlCache } from "./cache.ts";
import { DEFAULT_COMMAND_TIMEOUT_MS, guarded as guardedWithin } from "./client.ts";
import { backfillEmailIndex, type EmailBackfill } from "./email-index.ts";
import { createKeys } from "./keys.ts";
import { decodeStreamToken, encodeStreamToken } from "./stream-token.ts";
import { createRedisKeyLimits } from "./key-limits.ts";
import { accountFields, num, parseAccount, parseUsage } from "./records.ts";
import { createScript, UPDATE_IF_EXISTS } from "./scripts.ts";
import { createRedisWebhooks } from "./webhooks.ts";

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
  /**
   * Whether a settle moves the spend alerts it raised from its account's outbox to the webhook
   * queue at once; default true. Tests of `webhooks.sweep` turn it off, to leave outboxes as a
   * process that crashed right after its settle would.
   */
  moveAlertOutboxes?: boolean;
}

/** The Redis store, with the background email index backfill it started. */
export interface RedisStore extends Store {
  /**
   * How the backfill this store started ended (it never rejects); `skipped` when
   * `backfillEmailIndex` was off.
   */
  emailIndexBackfill: Promise<EmailBackfill>;
}

const scripts = { updateIfExists: createScript(UPDATE_IF_EXISTS) };

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

  const loadAccount = async (id: string) => parseAccount(id, await redis.hgetall(keys.account(id)));

  const { webhooks, alertsRaised } = createRedisWebhooks({
    redis,
    keys,
    guarded,
    now,
    moveOutboxes: options.moveAlertOutboxes ?? true,
  });

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

    ...createRedisApiKeys({ redis, keys, keyCache, invalidate, guarded }),

    ...createRedisKeyLimits({ redis, keys, invalidate, guarded }),
    ...createRedisBilling({ redis, keys, guarded, now, alertsRaised }),
    webhooks,

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
