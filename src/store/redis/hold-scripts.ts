import { TOKEN_WINDOW_MS } from "../gcra.ts";
import { NOW } from "./scripts.ts";

/**
 * The Lua of holds: taking one (with a call's rate limits, in one script), growing it, and what
 * every script that ends or expires one shares. A hold counts against its account's cap and, when
 * it names a key, against the key's own cap, in the same script, so neither can be passed by any
 * number of processes; the hold's holder entry says which key, so its end updates the key's sums.
 */

/**
 * The keys every billing script gets, in this order (`KEYS[1]` is `gcra`); the scripts name them
 * through `K`, so the TypeScript list and the Lua names cannot drift apart. All are in the
 * account's slot. `key` is the key's own hash (its cap); `gcra` its request rate's state.
 */
export const BILLING_KEYS = [
  "gcra",
  "tokens",
  "account",
  "key",
  "spent",
  "resv",
  "exp",
  "reserved",
  "settled",
  "released",
  "keySpent",
  "keyReserved",
  "holders",
  "usage",
  "partial",
  "partials",
  "days",
  "alertsFired",
  "alertOutbox",
] as const;

/** One name per billing key. */
export type BillingKeyName = (typeof BILLING_KEYS)[number];

/** `K.<name>`: the billing keys by name (a script given fewer has nil for the rest). */
const NAMED = `${NOW}
local K = {${BILLING_KEYS.map((name, i) => `${name} = KEYS[${i + 1}]`).join(", ")}}
`;

/**
 * Ending holds. A holder entry is "<key id> <tokens taken> <ms per token> <budget time after the
 * take>". `dropHold` takes a hold out of its period and its key's sum and returns its holder (nil
 * for none); `expire` drops the holds whose time has passed (no tokens come back: the call may
 * have run); `giveBack` returns `unused` of a holder's tokens to its key's budget, no more than
 * the part of the take the budget still counts (`tokenGiveBackMs` in gcra.ts, line for line).
 */
export const HOLDS = `${NAMED}
local function holderOf(id)
  local v = redis.call('HGET', K.holders, id)
  if not v then return nil end
  local keyId, count, ms, after = string.match(v, '^(%S+) (%S+) (%S+) (%S+)$')
  return {keyId = keyId, count = tonumber(count), ms = tonumber(ms), after = tonumber(after)}
end
local function dropHold(id)
  local amount = redis.call('HGET', K.resv, id)
  redis.call('ZREM', K.exp, id)
  if not amount then return nil end
  redis.call('HDEL', K.resv, id)
  redis.call('DECRBY', K.reserved, amount)
  local h = holderOf(id)
  if not h then return nil end
  redis.call('HDEL', K.holders, id)
  if redis.call('HINCRBY', K.keyReserved, h.keyId, -tonumber(amount)) <= 0 then
    redis.call('HDEL', K.keyReserved, h.keyId)
  end
  return h
end
local function expire(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.exp, '-inf', now)) do dropHold(id) end
end
local function giveBack(h, unused, now)
  if not h or h.count == 0 or unused <= 0 then return end
  local tat = tonumber(redis.call('HGET', K.tokens, h.keyId) or '')
  if not tat then return end
  local back = math.max(0, math.min(unused * h.ms, h.after - now))
  if back > 0 then redis.call('HSET', K.tokens, h.keyId, string.format('%.3f', tat - back)) end
end
`;

/**
 * Holds up to max (at least min) of what the account's cap leaves and, for a hold of a key
 * (keyId not ''), of what the key's own cap leaves, or adds to a live hold and renews its expiry.
 * Returns {granted, held-by-others ms, refused by the key's cap (1) or not (0)}: see `Grant` in
 * store.ts. A refusal is lasting when a short cap less its spend and the call's own hold would not
 * cover min (the account's first); otherwise temporary, with the wait until the soonest other hold
 * each short cap counts expires (the longer when both are short; a cap with no other hold makes it
 * lasting). max 0 only renews a live hold. A settled or released id is refused, so a late extension
 * never outlives its call. take: the token take a new hold keeps ('<count> <ms> <after>').
 */
const RESERVE_FN = `${HOLDS}
local function soonestOther(id, keyId, now)
  local from = 0
  while true do
    local page = redis.call('ZRANGE', K.exp, from, from + 63, 'WITHSCORES')
    if #page == 0 then return 0 end
    for i = 1, #page - 1, 2 do
      local other = page[i]
      if other ~= id and (keyId == nil or (holderOf(other) or {}).keyId == keyId) then
        return math.max(1, math.ceil(tonumber(page[i + 1]) - now))
      end
    end
    from = from + 64
  end
end
local function reserve(id, min, max, ttl, now, keyId, take)
  expire(now)
  if redis.call('SISMEMBER', K.settled, id) == 1 or redis.call('SISMEMBER', K.released, id) == 1 then
    return 0, 0, 0
  end
  if max == 0 then
    if redis.call('HEXISTS', K.resv, id) == 1 then redis.call('ZADD', K.exp, now + ttl, id) end
    return 0, 0, 0
  end
  local cap = tonumber(redis.call('HGET', K.account, 'cap') or '') or 0
  local spent = tonumber(redis.call('GET', K.spent) or '0')
  local left = cap - spent - tonumber(redis.call('GET', K.reserved) or '0')
  local keyCap = nil
  local keySpent, keyLeft = 0, math.huge
  if keyId ~= '' then keyCap = tonumber(redis.call('HGET', K.key, 'cap') or '') end
  if keyCap then
    keySpent = tonumber(redis.call('HGET', K.keySpent, keyId) or '0')
    keyLeft = keyCap - keySpent - tonumber(redis.call('HGET', K.keyReserved, keyId) or '0')
  end
  local grant = math.max(0, math.min(max, left, keyLeft))
  if grant < min then
    local own = tonumber(redis.call('HGET', K.resv, id) or '0')
    local accountShort = math.min(max, left) < min
    local keyShort = math.min(max, keyLeft) < min
    local byKey = accountShort and 0 or 1
    if accountShort and math.min(max, cap - spent - own) < min then return 0, 0, 0 end
    if keyShort and math.min(max, keyCap - keySpent - own) < min then return 0, 0, 1 end
    local wait = 0
    if accountShort then wait = soonestOther(id, nil, now) end
    if wait == 0 and accountShort then return 0, 0, byKey end
    if keyShort then
      local w = soonestOther(id, keyId, now)
      if w == 0 then return 0, 0, byKey end
      wait = math.max(wait, w)
    end
    return 0, wait, byKey
  end
  redis.call('HINCRBY', K.resv, id, grant)
  redis.call('ZADD', K.exp, now + ttl, id)
  redis.call('INCRBY', K.reserved, grant)
  if keyId ~= '' then
    redis.call('HINCRBY', K.keyReserved, keyId, grant)
    if redis.call('HEXISTS', K.holders, id) == 0 then redis.call('HSET', K.holders, id, keyId .. ' ' .. take) end
  end
  return grant, 0, 0
end
`;

/**
 * KEYS: `BILLING_KEYS`. ARGV: id, min, max, ttl ms, now ms, key id ('' for the account alone).
 * Returns {granted, held-by-others ms, by the key's cap}.
 */
export const RESERVE = `${RESERVE_FN}
local grant, held, byKey = reserve(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  clock(ARGV[5]), ARGV[6], '0 0 0')
return {grant, held, byKey}
`;

/** One weighted GCRA step, line for line as `gcraStep` in src/store/gcra.ts. */
const GCRA = `
local function gcra(tat, interval, tolerance, cost, now)
  if tat < now then tat = now end
  local newTat = tat + interval * cost
  local allowAt = newTat - tolerance
  if allowAt > now then
    return 0, tat, math.max(0, math.floor((now - tat + tolerance) / interval)), math.ceil(tat - now),
      math.ceil(allowAt - now)
  end
  return 1, newTat, math.max(0, math.floor((now - allowAt) / interval)), math.ceil(newTat - now), 0
end
`;

/**
 * The admission of a request: its key's request rate (GCRA), then, for a chat call, its key's
 * token budget (GCRA in tokens, as `tokenStep`; a take above a minute's tokens takes the minute)
 * and its hold (when KEYS has the period's keys and ARGV 7..10 are given). A call the token budget
 * refuses holds nothing; a call the cap refuses takes no tokens. The request state expires a
 * second after its theoretical arrival time.
 * KEYS: `BILLING_KEYS` (only gcra and tokens without a hold). ARGV: interval ms, burst, now ms, key
 * id, tokens per minute ('' for no limit), the call's tokens ('' for no chat call, 0 to read the
 * budget only), then id, min, max, ttl ms.
 * Returns {allowed, limit, remaining, reset ms, retry-after ms, granted, held-by-others ms, by the
 * key's cap, then the token budget: allowed, limit (-1: no budget), remaining, reset ms, retry ms}.
 */
export const CHARGE_RATE_LIMIT = `${RESERVE_FN}${GCRA}
local now = clock(ARGV[3])
local interval, burst, keyId = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4]
local tpm, want = tonumber(ARGV[5]), tonumber(ARGV[6])
local allowed, newTat, remaining, reset, retry =
  gcra(tonumber(redis.call('GET', K.gcra) or '') or now, interval, interval * burst, 1, now)
local budget = {1, -1, 0, 0, 0}
local tokenTat, perToken
if tpm and want then
  perToken = ${TOKEN_WINDOW_MS} / tpm
  tokenTat = tonumber(redis.call('HGET', K.tokens, keyId) or '') or now
  local ok, _, left, full = gcra(tokenTat, perToken, ${TOKEN_WINDOW_MS}, 0, now)
  budget = {ok, tpm, left, full, 0}
end
local function answer(granted, held, byKey)
  return {allowed, burst, remaining, reset, retry, granted, held, byKey, unpack(budget)}
end
if allowed == 0 then return answer(0, 0, 0) end
redis.call('SET', K.gcra, string.format('%.3f', newTat), 'PX', math.ceil(newTat - now) + 1000)
if #KEYS <= 2 then return answer(0, 0, 0) end
local take, after = '0 0 0', nil
if perToken and want > 0 then
  local cost = math.min(want, tpm)
  local ok, tat, left, full, wait = gcra(tokenTat, perToken, ${TOKEN_WINDOW_MS}, cost, now)
  if ok == 0 then
    budget = {0, tpm, left, full, wait}
    return answer(0, 0, 0)
  end
  take = string.format('%d %.17g %.17g', cost, perToken, tat)
  after = {1, tpm, left, full, 0, tat = tat}
end
local granted, held, byKey = reserve(ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), now,
  keyId, take)
if granted > 0 and after then
  redis.call('HSET', K.tokens, keyId, string.format('%.3f', after.tat))
  budget = {after[1], after[2], after[3], after[4], after[5]}
end
return answer(granted, held, byKey)
`;
