import { createHash } from "node:crypto";
import type { RedisClient } from "./client.ts";

/**
 * The Lua scripts that make each billing phase one atomic round trip. They are sent by
 * EVALSHA; after a Redis restart (NOSCRIPT) the runner sends the source once with EVAL, which
 * loads it again.
 */

/**
 * "Now" for the scripts: the caller's clock when it passes one (tests), otherwise the Redis
 * server's own clock, so processes whose clocks disagree still agree on expiries and rates.
 */
const NOW = `
local function clock(given)
  local n = tonumber(given)
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/** Drops expired reservations of a period: KEYS resv, resv-exp, reserved. */
const EXPIRE = `${NOW}
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

/**
 * Holds up to max (at least min) of what the cap leaves, or adds to a live hold and renews
 * its expiry; returns the amount granted (0 = refused). max 0 only renews a live hold. A
 * settled or released id is refused, so a late extension never outlives its call.
 * Keys: account, spent, resv, resv-exp, reserved, settled, released.
 */
const RESERVE_FN = `${EXPIRE}
local function reserve(k, id, min, max, ttl, now)
  expire(k[3], k[4], k[5], now)
  if redis.call('SISMEMBER', k[6], id) == 1 or redis.call('SISMEMBER', k[7], id) == 1 then return 0 end
  if max == 0 then
    if redis.call('HEXISTS', k[3], id) == 1 then redis.call('ZADD', k[4], now + ttl, id) end
    return 0
  end
  local cap = tonumber(redis.call('HGET', k[1], 'cap') or '') or 0
  local spent = tonumber(redis.call('GET', k[2]) or '0')
  local reserved = tonumber(redis.call('GET', k[5]) or '0')
  local grant = math.max(0, math.min(max, cap - spent - reserved))
  if grant < min then return 0 end
  redis.call('HINCRBY', k[3], id, grant)
  redis.call('ZADD', k[4], now + ttl, id)
  redis.call('INCRBY', k[5], grant)
  return grant
end
`;

/** KEYS: account, spent, resv, resv-exp, reserved, settled, released. ARGV: id, min, max, ttl ms, now ms. */
export const RESERVE = `${RESERVE_FN}
return reserve(KEYS, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), clock(ARGV[5]))
`;

/**
 * Charges a request to its key's rate limit: GCRA, line for line as src/store/gcra.ts, then
 * (when KEYS 2..8 and ARGV 4..7 are given) the reservation of an allowed call. The state
 * expires a second after its theoretical arrival time. KEYS: gcra, then the RESERVE keys.
 * ARGV: interval ms, burst, now ms, then id, min, max, ttl ms.
 * Returns {allowed, limit, remaining, reset ms, retry-after ms, granted}.
 */
export const CHARGE_RATE_LIMIT = `${RESERVE_FN}
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = clock(ARGV[3])
local tolerance = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
if tat < now then tat = now end
local newTat = tat + interval
local allowAt = newTat - tolerance
if allowAt > now then
  return {0, burst, 0, math.ceil(tat - now), math.ceil(allowAt - now), 0}
end
redis.call('SET', KEYS[1], string.format('%.3f', newTat), 'PX', math.ceil(newTat - now) + 1000)
local granted = 0
if #KEYS > 1 then
  granted = reserve({KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]},
    ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), now)
end
return {1, burst, math.max(0, math.floor((now - allowAt) / interval)), math.ceil(newTat - now), 0, granted}
`;

/**
 * The UTC date ("YYYY-MM-DD") of an instant in ms, for the day totals of SETTLE: Lua in Redis has
 * no calendar (no os.date), so this is the civil-from-days algorithm (H. Hinnant), in integers.
 */
const UTC_DATE = `
local function utcDate(ms)
  local z = math.floor(ms / 86400000) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02d', y, m, d)
end
`;

/**
 * Replaces a hold by its charge and, for a completed call, appends its usage record, once per
 * id. The charge never takes spent plus the other holds past the cap: a call whose hold was
 * lost (a long outage) is charged only what the cap still allows, and its record says so.
 * A spend-cap abort's charge is kept by id (partials) besides the period's sum (partial).
 * A charge above 0 is added to its day (days), in the same step as to spent: the settle's UTC
 * date (by ARGV now, or the server's clock when it is empty), clamped into [first, last].
 * KEYS: spent, resv, resv-exp, reserved, settled, usage stream, partial, account, released,
 * partials, days.
 * ARGV: id, charge, settled-set ttl s, now ms, the period's first and last dates, then record
 * fields (none for an abort).
 * Returns the amount charged, -1 when the id was settled before, -2 when it was released.
 */
export const SETTLE = `${NOW}${UTC_DATE}
local id, charge, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('SISMEMBER', KEYS[9], id) == 1 then return -2 end
if redis.call('SADD', KEYS[5], id) == 0 then return -1 end
redis.call('EXPIRE', KEYS[5], keep)
local held = redis.call('HGET', KEYS[2], id)
if held then
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('DECRBY', KEYS[4], tonumber(held))
end
local cap = tonumber(redis.call('HGET', KEYS[8], 'cap') or '') or 0
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local others = tonumber(redis.call('GET', KEYS[4]) or '0')
charge = math.max(0, math.min(charge, cap - spent - others))
redis.call('INCRBY', KEYS[1], charge)
if charge > 0 then
  local day = utcDate(clock(ARGV[4]))
  if day < ARGV[5] then day = ARGV[5] elseif day > ARGV[6] then day = ARGV[6] end
  redis.call('HINCRBY', KEYS[11], day, charge)
end
if #ARGV > 6 then
  local fields = {unpack(ARGV, 7)}
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'cost' then fields[i + 1] = tostring(charge) end
  end
  redis.call('XADD', KEYS[6], '*', unpack(fields))
else
  redis.call('INCRBY', KEYS[7], charge)
  redis.call('HSET', KEYS[10], id, charge)
  redis.call('EXPIRE', KEYS[10], keep)
end
return charge
`;

/**
 * Drops a hold without charge and closes its id, unless it was settled: the answer tells a
 * settle whose reply was lost apart from one that never landed.
 * KEYS: resv, resv-exp, reserved, settled, released. ARGV: id, released-set ttl s.
 * Returns 1 when released (now or before), 2 when the id had been settled.
 */
export const RELEASE = `
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 1 then return 2 end
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('EXPIRE', KEYS[5], tonumber(ARGV[2]))
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
expire(KEYS[2], KEYS[3], KEYS[4], clock(ARGV[1]))
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
  run(redis: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown>;
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
