import type { RateDecision } from "./store.ts";

/**
 * The Generic Cell Rate Algorithm: one stored number per key (the theoretical arrival time),
 * exact retry-after, and no refill timers. Kept pure so the memory store runs it directly and
 * the Redis Lua script can mirror it line by line.
 *
 * With emission interval T = 1000 / rps and tolerance tau = T * burst, a request at `now` is
 * allowed when max(tat, now) + T - tau <= now.
 */
export function gcra(
  tatMs: number | undefined,
  rps: number,
  burst: number,
  nowMs: number,
): { decision: RateDecision; tatMs: number | undefined } {
  const interval = 1000 / rps;
  const tolerance = interval * burst;
  const tat = Math.max(tatMs ?? nowMs, nowMs);
  const newTat = tat + interval;
  const allowAt = newTat - tolerance;
  if (allowAt > nowMs) {
    return {
      decision: {
        allowed: false,
        limit: burst,
        remaining: 0,
        resetMs: Math.ceil(tat - nowMs),
        retryAfterMs: Math.ceil(allowAt - nowMs),
      },
      tatMs,
    };
  }
  return {
    decision: {
      allowed: true,
      limit: burst,
      remaining: Math.max(0, Math.floor((nowMs - allowAt) / interval)),
      resetMs: Math.ceil(newTat - nowMs),
      retryAfterMs: 0,
    },
    tatMs: newTat,
  };
}
