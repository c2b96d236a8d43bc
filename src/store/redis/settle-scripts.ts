import { HOLDS } from "./hold-scripts.ts";

/**
 * The Lua that ends holds and reads money: a settle (charge and record), a release, and the
 * balances. Every one gets `BILLING_KEYS` (hold-scripts.ts) and shares its hold logic, so a hold's
 * end updates its account's and its key's sums in the same step.
 */

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
 * Spend alerts (`reachedPercents` and `firedMember` in spend-alerts.ts, line for line): each
 * threshold of the list (percents, comma-separated) that the spend has reached on the cap, and
 * whose member is added to the period's fired set now, is appended to the account's outbox with
 * what it was reached at. Returns how many it appended.
 */
const ALERTS = `
local function raise(percents, keyId, cap, spent, base)
  if not cap or cap <= 0 then return 0 end
  local n = 0
  for p in string.gmatch(percents, '%d+') do
    local member = keyId == '' and ('a ' .. p) or ('k ' .. keyId .. ' ' .. p)
    if spent * 100 >= tonumber(p) * cap and redis.call('SADD', K.alertsFired, member) == 1 then
      redis.call('XADD', K.alertOutbox, '*', 'account', base.account, 'key', keyId, 'period', base.period,
        'percent', p, 'cap', string.format('%d', cap), 'spent', string.format('%d', spent),
        'time', string.format('%d', base.now))
      n = n + 1
    end
  end
  return n
end
`;

/**
 * Replaces a hold by its charge and, for a completed call, appends its usage record, once per
 * id, and raises the spend alerts the new spend reached (ALERTS: the account's cap, then the
 * key's own), once per period and scope. The charge never takes spent plus the other holds past
 * the account's cap, nor, for a call of a key (ARGV key id), the key's spend plus its other holds
 * past the key's own cap: a call whose hold was lost (a long outage) is charged only what the caps
 * still allow, and its record says so. The key's spend grows by the charge in the same step, and
 * its token budget gets back what the hold's take was beyond the used tokens (ARGV used; '' gives
 * nothing back).
 * A spend-cap abort's charge is kept by id (partials) besides the period's sum (partial).
 * A charge above 0 is added to its day (days), in the same step as to spent: the settle's UTC
 * date (by ARGV now, or the server's clock when it is empty), clamped into [first, last].
 * KEYS: `BILLING_KEYS`. ARGV: id, charge, settled-set ttl s, now ms, the period's first and last
 * dates, key id ('' for the account alone), used tokens, alert thresholds (percents, comma-separated;
 * '' for none), account id, period, then record fields (none for an abort).
 * Returns {the amount charged (-1 when the id was settled before, -2 when it was released), the
 * number of alerts raised}.
 */
export const SETTLE = `${HOLDS}${UTC_DATE}${ALERTS}
local id, charge, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local keyId, used = ARGV[7], tonumber(ARGV[8])
if redis.call('SISMEMBER', K.released, id) == 1 then return {-2, 0} end
if redis.call('SADD', K.settled, id) == 0 then return {-1, 0} end
redis.call('EXPIRE', K.settled, keep)
local now = clock(ARGV[4])
local h = dropHold(id)
if used and h then giveBack(h, h.count - used, now) end
local cap = tonumber(redis.call('HGET', K.account, 'cap') or '') or 0
local spent = tonumber(redis.call('GET', K.spent) or '0')
charge = math.max(0, math.min(charge, cap - spent - tonumber(redis.call('GET', K.reserved) or '0')))
local keyCap, keySpent = nil, 0
if keyId ~= '' then
  keyCap = tonumber(redis.call('HGET', K.key, 'cap') or '')
  keySpent = tonumber(redis.call('HGET', K.keySpent, keyId) or '0')
  if keyCap then
    local others = tonumber(redis.call('HGET', K.keyReserved, keyId) or '0')
    charge = math.max(0, math.min(charge, keyCap - keySpent - others))
  end
  if charge > 0 then redis.call('HINCRBY', K.keySpent, keyId, charge) end
end
redis.call('INCRBY', K.spent, charge)
if charge > 0 then
  local day = utcDate(now)
  if day < ARGV[5] then day = ARGV[5] elseif day > ARGV[6] then day = ARGV[6] end
  redis.call('HINCRBY', K.days, day, charge)
end
if #ARGV > 11 then
  local fields = {unpack(ARGV, 12)}
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'cost' then fields[i + 1] = tostring(charge) end
  end
  redis.call('XADD', K.usage, '*', unpack(fields))
else
  redis.call('INCRBY', K.partial, charge)
  redis.call('HSET', K.partials, id, charge)
  redis.call('EXPIRE', K.partials, keep)
end
local raised = 0
if ARGV[9] ~= '' then
  local base = {account = ARGV[10], period = ARGV[11], now = now}
  raised = raise(ARGV[9], '', cap, spent + charge, base)
  if keyId ~= '' then raised = raised + raise(ARGV[9], keyId, keyCap, keySpent + charge, base) end
  if raised > 0 then redis.call('EXPIRE', K.alertsFired, keep) end
end
return {charge, raised}
`;

/**
 * Drops a hold without charge and closes its id, unless it was settled: the answer tells a
 * settle whose reply was lost apart from one that never landed. The hold's key gets back all the
 * tokens the hold took (the call is not billed), once: a second release finds no hold.
 * KEYS: `BILLING_KEYS`. ARGV: id, released-set ttl s, now ms ('' for the server's clock).
 * Returns 1 when released (now or before), 2 when the id had been settled.
 */
export const RELEASE = `${HOLDS}
if redis.call('SISMEMBER', K.settled, ARGV[1]) == 1 then return 2 end
redis.call('SADD', K.released, ARGV[1])
redis.call('EXPIRE', K.released, tonumber(ARGV[2]))
local h = dropHold(ARGV[1])
if h then giveBack(h, h.count, clock(ARGV[3])) end
return 1
`;

/** Spent and live holds of a period. KEYS: `BILLING_KEYS`. ARGV: now ms. */
export const BALANCE = `${HOLDS}
expire(clock(ARGV[1]))
return {tonumber(redis.call('GET', K.spent) or '0'), tonumber(redis.call('GET', K.reserved) or '0')}
`;

/**
 * Each key's spend and live holds in a period, as two flat field-value lists.
 * KEYS: `BILLING_KEYS`. ARGV: now ms.
 */
export const KEY_BALANCES = `${HOLDS}
expire(clock(ARGV[1]))
return {redis.call('HGETALL', K.keySpent), redis.call('HGETALL', K.keyReserved)}
`;
