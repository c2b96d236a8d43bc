import type { ApiKeyRecord, KeyRotation, Store } from "../store.ts";
import { copy, type TtlCache } from "./cache.ts";
import type { RedisClient } from "./client.ts";
import type { createKeys } from "./keys.ts";
import { apiKeyFields, parseApiKey, recordOf } from "./records.ts";
import { createScript, UPDATE_IF_EXISTS } from "./scripts.ts";

/**
 * Switches a key to a new secret in one step, in the key's own slot. KEYS: the key's hash.
 * ARGV: new hash, new prefix, grace ms, now (the caller's: key times are callers' times, see
 * `RotateApiKeyRequest.nowMs`), new expiry ms ('' keeps the key's). A revoked key, or one expired
 * by now when no new expiry is given, is left as it is. Returns the outcome
 * ('missing', 'rotated', 'revoked', 'expired'), the hash replaced, the hash it pushed out (the
 * secret the previous rotation replaced; '' for none) and the key's fields as they are now.
 */
const ROTATE = `
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 then return {'missing'} end
local cur = redis.call('HMGET', k, 'hash', 'prefix', 'prev_hash', 'revoked', 'expires')
local now = tonumber(ARGV[4])
local outcome = 'rotated'
if cur[4] == '1' then
  outcome = 'revoked'
elseif ARGV[5] == '' and cur[5] and tonumber(cur[5]) <= now then
  outcome = 'expired'
end
if outcome == 'rotated' then
  redis.call('HSET', k, 'hash', ARGV[1], 'prefix', ARGV[2], 'prev_hash', cur[1], 'prev_prefix', cur[2],
    'prev_expires', string.format('%.0f', now + tonumber(ARGV[3])))
  if ARGV[5] ~= '' then redis.call('HSET', k, 'expires', ARGV[5]) end
end
return {outcome, cur[1], cur[3] or '', unpack(redis.call('HGETALL', k))}
`;

const scripts = { rotate: createScript(ROTATE), updateIfExists: createScript(UPDATE_IF_EXISTS) };

/** What the key methods share with the rest of the Redis store. */
export interface RedisApiKeyDeps {
  redis: RedisClient;
  keys: ReturnType<typeof createKeys>;
  /** Keys by hash, misses too: the hot path of every keyed call. */
  keyCache: TtlCache<ApiKeyRecord | undefined>;
  /** Drops a cached entry (`k:<hash>`) here and, through pub/sub, in every process. */
  invalidate(message: string): Promise<void>;
  /** Runs store commands within the store's deadline (503 past it). */
  guarded<T>(operation: () => Promise<T>): Promise<T>;
}

/**
 * The API-key methods of the Redis store. A key's hash lives in its account's slot; the
 * `key-by-hash` index is outside it (a lookup knows only the hash), so writes that touch both
 * are ordered to keep every reader safe: an index entry is written before the key accepts its
 * secret, and removed only after the key no longer does.
 */
export function createRedisApiKeys(
  deps: RedisApiKeyDeps,
): Pick<Store, "createApiKey" | "findApiKeyByHash" | "revokeApiKey" | "rotateApiKey" | "listApiKeys"> {
  const { redis, keys, keyCache, invalidate, guarded } = deps;
  const loadKey = async (accountId: string, keyId: string) =>
    parseApiKey(keyId, await redis.hgetall(keys.apiKey(accountId, keyId)));
  const location = (key: Pick<ApiKeyRecord, "id" | "accountId">) => `${key.accountId} ${key.id}`;
  /** Drops the cached answers for every hash given, here and in every process. */
  const forget = (hashes: Array<string | undefined>) =>
    Promise.all(hashes.filter((h): h is string => !!h).map((h) => invalidate(`k:${h}`)));

  return {
    createApiKey: (key) =>
      guarded(async () => {
        await redis.hset(keys.apiKey(key.accountId, key.id), apiKeyFields(key));
        await redis.sadd(keys.accountKeys(key.accountId), key.id);
        await redis.set(keys.keyById(key.id), key.accountId);
        await redis.set(keys.keyByHash(key.hash), location(key));
        if (key.previous) await redis.set(keys.keyByHash(key.previous.hash), location(key));
        await forget([key.hash, key.previous?.hash]);
      }),
    findApiKeyByHash: (hash) =>
      guarded(async () =>
        copy(
          await keyCache.get(hash, async () => {
            const found = await redis.get(keys.keyByHash(hash));
            const [accountId, keyId] = found?.split(" ") ?? [];
            return accountId && keyId ? loadKey(accountId, keyId) : undefined;
          }),
        ),
      ),
    revokeApiKey: (apiKeyId) =>
      guarded(async () => {
        const accountId = await redis.get(keys.keyById(apiKeyId));
        if (!accountId) return undefined;
        const found = await scripts.updateIfExists.run(redis, [keys.apiKey(accountId, apiKeyId)], ["revoked", "1"]);
        if (Number(found) === 0) return undefined;
        const key = await loadKey(accountId, apiKeyId);
        if (key) await forget([key.hash, key.previous?.hash]);
        return key;
      }),
    rotateApiKey: ({ apiKeyId, hash, prefix, gracePeriodMs, expireTimeMs, nowMs }) =>
      guarded(async (): Promise<KeyRotation | undefined> => {
        const accountId = await redis.get(keys.keyById(apiKeyId));
        if (!accountId) return undefined;
        // The new secret's index entry first: until the script switches the key it leads to a
        // key that refuses that secret (and no one holds it yet), and from the switch on every
        // reader finds it. Written after, there would be a moment when the new secret is shown
        // and its lookups still miss.
        await redis.set(keys.keyByHash(hash), location({ id: apiKeyId, accountId }));
        const [outcome, replaced, pushedOut, ...fields] = (await scripts.rotate.run(
          redis,
          [keys.apiKey(accountId, apiKeyId)],
          [hash, prefix, gracePeriodMs, nowMs, expireTimeMs ?? ""],
        )) as string[];
        const key = parseApiKey(apiKeyId, recordOf(fields));
        if (outcome !== "rotated") {
          await redis.del(keys.keyByHash(hash));
          return key && (outcome === "revoked" || outcome === "expired") ? { outcome, key } : undefined;
        }
        // The secret pushed out no longer works: its index entry can go, now that the key is switched.
        if (pushedOut) await redis.del(keys.keyByHash(pushedOut));
        await forget([hash, replaced, pushedOut]);
        return key && { outcome, key };
      }),
    listApiKeys: (accountId) =>
      guarded(async () => {
        const ids = await redis.smembers(keys.accountKeys(accountId));
        const found = await Promise.all(ids.map((id) => loadKey(accountId, id)));
        return found.filter((k): k is ApiKeyRecord => k !== undefined);
      }),
  };
}
