import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/**
 * The Lua scripts that make each billing phase one atomic round trip. They are sent by
 * EVALSHA; after a Redis restart (NOSCRIPT) the runner sends the source once with EVAL, which
 * loads it again.
 */

/** Drops expired reservations of a period: KEYS resv, resv-exp, reserved. */
const EXPIRE = `
local function expire(resv, exp, total, now)
  local dead = redis.call('ZRANGEBYSCORE', exp, '-inf', now)
  for _, id in ipairs(dead) do
    local amount = tonumber(redis.call('HGET', resv, id) or '0')
    redis.call('HDEL', resv, id)
    redis.call('ZREM', exp, id)
    redis.call('DECRBY', total, amount)
  end
end
`;

/** GCRA, line for line as src/store/gcra.ts. KEYS: tat. ARGV: interval ms, burst, now ms. */
export const ADMIT = `
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local tolerance = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1]) or ARGV[3])
if tat < now then tat = now end
local newTat = tat + interval
local allowAt = newTat - tolerance
if allowAt > now then
  return {0, burst, 0, math.ceil(tat - now), math.ceil(allowAt - now)}
end
redis.call('SET', KEYS[1], string.format('%.3f', newTat), 'PX', math.ceil(newTat - now) + 1000)
return {1, burst, math.max(0, math.floor((now - allowAt) / interval)), math.ceil(newTat - now), 0}
`;

/**
 * Holds up to ARGV max (at least ARGV min) of what the cap leaves, or adds to a live hold and
 * renews its expiry. KEYS: account, spent, resv, resv-exp, reserved, settled.
 * ARGV: id, min, max, ttl ms, now ms. Returns the amount granted (0 = refused).
 */
export const RESERVE = `${EXPIRE}
local id, min, max, ttl, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
expire(KEYS[3], KEYS[4], KEYS[5], now)
if redis.call('SISMEMBER', KEYS[6], id) == 1 then return 0 end
local cap = tonumber(redis.call('HGET', KEYS[1], 'cap') or '') or 0
local spent = tonumber(redis.call('GET', KEYS[2]) or '0')
local reserved = tonumber(redis.call('GET', KEYS[5]) or '0')
local grant = math.max(0, math.min(max, cap - spent - reserved))
if grant < min then return 0 end
redis.call('HINCRBY', KEYS[3], id, grant)
redis.call('ZADD', KEYS[4], now + ttl, id)
redis.call('INCRBY', KEYS[5], grant)
return grant
`;

/**
 * Replaces a hold by its charge and, for a completed call, appends its usage record, once per
 * id. KEYS: spent, resv, resv-exp, reserved, settled, usage stream, partial.
 * ARGV: id, charge, settled-set ttl s, then record fields (none for an abort).
 */
export const SETTLE = `
local id, charge, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('SADD', KEYS[5], id) == 0 then return 0 end
redis.call('EXPIRE', KEYS[5], keep)
local held = redis.call('HGET', KEYS[2], id)
if held then
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('DECRBY', KEYS[4], tonumber(held))
end
redis.call('INCRBY', KEYS[1], charge)
if #ARGV > 3 then
  redis.call('XADD', KEYS[6], '*', unpack(ARGV, 4))
else
  redis.call('INCRBY', KEYS[7], charge)
end
return 1
`;

/** Drops a hold without charge. KEYS: resv, resv-exp, reserved. ARGV: id. */
export const RELEASE = `
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DECRBY', KEYS[3], tonumber(held))
end
return 1
`;

/** Spent and live holds of a period. KEYS: spent, resv, resv-exp, reserved. ARGV: now ms. */
export const BALANCE = `${EXPIRE}
expire(KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]))
return {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('GET', KEYS[4]) or '0')}
`;

/** Sets fields of an existing hash only. KEYS: hash. ARGV: field, value, ... Returns 0 when absent. */
export const UPDATE_IF_EXISTS = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return 1
`;

/** A script runner: EVALSHA first, EVAL on NOSCRIPT (which also loads it for next time). */
export interface Script {
  run(redis: Redis, keys: string[], args: Array<string | number>): Promise<unknown>;
}

export function createScript(source: string): Script {
  const sha = createHash("sha1").update(source).digest("hex");
  return {
    async run(redis, keys, args) {
      try {
        return await redis.evalsha(sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
        return redis.eval(source, keys.length, ...keys, ...args);
      }
    },
  };
}
