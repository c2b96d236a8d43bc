import { createHash } from "node:crypto";
import type { RedisClient } from "./client.ts";

/**
 * The Lua scripts that make each billing phase one atomic round trip (hold-scripts.ts and
 * settle-scripts.ts hold the billing ones), and their runner. They are sent by EVALSHA; after a
 * Redis restart (NOSCRIPT) the runner sends the source once with EVAL, which loads it again.
 */

/**
 * "Now" for the scripts: the caller's clock when it passes one (tests), otherwise the Redis
 * server's own clock, so processes whose clocks disagree still agree on expiries and rates.
 * Exported for the billing scripts (hold-scripts.ts, settle-scripts.ts).
 */
export const NOW = `
local function clock(given)
  local n = tonumber(given)
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
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
