import { NOW } from "./scripts.ts";

/**
 * The Lua of spend alerts' delivery queue. Every script touches the global webhook keys only
 * (`keys.webhooks`, one hash tag, so one Cluster slot); the settle script writes alerts to their
 * account's outbox, in the account's slot, and the process moves them here with QUEUE_ALERT.
 * Times are `clock(now)` (scripts.ts): the Redis server's clock unless a caller passes its own.
 */

/**
 * Queues one alert, once: its hash (its fields, kept `keep` seconds) doubles as the mark that it
 * was queued, so a move repeated by a sweep or a second process adds nothing.
 * KEYS: the alert's hash, the queue. ARGV: keep s, alert id, then the alert's fields.
 * Returns 1 when queued now, 0 when it had been.
 */
export const QUEUE_ALERT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]))
redis.call('XADD', KEYS[2], '*', 'id', ARGV[2])
return 1
`;

/**
 * Fans one queued alert out: one pending delivery, due now, per endpoint given (none is made twice),
 * listed in its endpoint's deliveries (the newest `kept`), then acknowledges and deletes the queue
 * entry, so the queue holds only alerts not fanned out yet. An alert whose hash has expired is dropped.
 * KEYS: the queue, the due set, the alert's hash, then per endpoint its delivery hash and its list.
 * ARGV: queue entry id, group, now ms, keep s, kept, alert id, event type, then the endpoint ids.
 */
export const FAN_OUT = `${NOW}
local now = clock(ARGV[3])
if redis.call('EXISTS', KEYS[3]) == 1 then
  for i = 8, #ARGV do
    local delivery, list = KEYS[2 * (i - 8) + 4], KEYS[2 * (i - 8) + 5]
    if redis.call('HSETNX', delivery, 'status', 'pending') == 1 then
      redis.call('HSET', delivery, 'attempts', 0, 'created', now, 'updated', now, 'next', now, 'type', ARGV[7])
      redis.call('EXPIRE', delivery, tonumber(ARGV[4]))
      redis.call('ZADD', KEYS[2], 'NX', now, ARGV[6] .. ' ' .. ARGV[i])
      redis.call('ZADD', list, now, ARGV[6])
      redis.call('ZREMRANGEBYRANK', list, 0, -tonumber(ARGV[5]) - 1)
    end
  end
end
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
`;

/**
 * Leases the deliveries due by now: each is due again when its lease ends, so one whose attempt is
 * never recorded (its process died) is tried again then, and no other dispatcher takes it meanwhile.
 * KEYS: the due set. ARGV: now ms, lease ms, max. Returns the members ("<alert id> <endpoint id>").
 */
export const CLAIM_DUE = `${NOW}
local now = clock(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), member) end
return due
`;

/**
 * Records one attempt: counts it, and keeps the delivery pending and due `retry` ms from now, or ends
 * it (delivered or failed) and takes it off the due set. A delivery already delivered is left as it
 * is (a late attempt of an expired lease), and so is one that no longer exists.
 * KEYS: the delivery hash, the due set. ARGV: member, outcome (delivered, retry, failed), now ms,
 * retry ms, HTTP status ('' for none), error ('' for none), keep s. Returns 1 when recorded.
 */
export const RECORD_ATTEMPT = `${NOW}
local status = redis.call('HGET', KEYS[1], 'status')
if not status or status == 'delivered' then return 0 end
local now = clock(ARGV[3])
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HDEL', KEYS[1], 'last_status', 'last_error', 'next')
redis.call('HSET', KEYS[1], 'status', ARGV[2] == 'retry' and 'pending' or ARGV[2], 'updated', now)
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'last_status', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'last_error', ARGV[6]) end
if ARGV[2] == 'retry' then
  local due = now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'next', due)
  redis.call('ZADD', KEYS[2], due, ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[7]))
return 1
`;

/**
 * Deletes an account's alert outbox once it is empty, so a sweep finds only outboxes with alerts in
 * them; a settle that appends meanwhile makes it again. KEYS: the outbox.
 */
export const DROP_EMPTY_OUTBOX = `
if redis.call('XLEN', KEYS[1]) == 0 then return redis.call('DEL', KEYS[1]) end
return 0
`;
