import type { ApiKeyPatch, Store } from "../store.ts";
import type { RedisClient } from "./client.ts";
import type { createKeys } from "./keys.ts";
import { parseApiKey } from "./records.ts";
import { createScript } from "./scripts.ts";

/**
 * Sets and removes fields of an existing key's hash in one step. KEYS: the key's hash. ARGV:
 * field, value, ..., '--', fields to remove. Returns 0 when there is no such key.
 */
const UPDATE_FIELDS = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local i = 1
while ARGV[i] ~= '--' do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for j = i + 1, #ARGV do redis.call('HDEL', KEYS[1], ARGV[j]) end
return 1
`;

const updateFields = createScript(UPDATE_FIELDS);

/** The hash fields of a key's limits (see `apiKeyFields`), by the record's names. */
const FIELDS = { spendCapUsdMicros: "cap", tokensPerMinute: "tpm" } as const satisfies Record<
  keyof ApiKeyPatch,
  string
>;

/** What `updateApiKey` shares with the rest of the Redis store. */
export interface RedisKeyLimitDeps {
  redis: RedisClient;
  keys: ReturnType<typeof createKeys>;
  /** Drops a cached entry (`k:<hash>`) here and, through pub/sub, in every process. */
  invalidate(message: string): Promise<void>;
  /** Runs store commands within the store's deadline (503 past it). */
  guarded<T>(operation: () => Promise<T>): Promise<T>;
}

/**
 * `updateApiKey` of the Redis store. The key's cap lives in its own hash, in its account's slot,
 * where the hold and settle scripts read it, so a new cap rules the next hold in every process at
 * once; cached copies of the key (by each of its secrets) are dropped everywhere for the rest.
 */
export function createRedisKeyLimits(deps: RedisKeyLimitDeps): Pick<Store, "updateApiKey"> {
  const { redis, keys, invalidate, guarded } = deps;
  return {
    updateApiKey: ({ apiKeyId, patch }) =>
      guarded(async () => {
        const accountId = await redis.get(keys.keyById(apiKeyId));
        if (!accountId) return undefined;
        const set: string[] = [];
        const remove: string[] = [];
        for (const [field, name] of Object.entries(FIELDS) as Array<[keyof ApiKeyPatch, string]>) {
          const value = patch[field];
          if (value === null) remove.push(name);
          else if (value !== undefined) set.push(name, String(value));
        }
        const hash = keys.apiKey(accountId, apiKeyId);
        if (Number(await updateFields.run(redis, [hash], [...set, "--", ...remove])) === 0) return undefined;
        const key = parseApiKey(apiKeyId, await redis.hgetall(hash));
        if (key) await Promise.all([key.hash, key.previous?.hash].flatMap((h) => (h ? [invalidate(`k:${h}`)] : [])));
        return key;
      }),
  };
}
