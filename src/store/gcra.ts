import type { RateDecision } from "./store.ts";

/**
 * One step of the Generic Cell Rate Algorithm, weighted: a request of `cost` units at `now` is
 * allowed when max(tat, now) + cost * interval - tolerance <= now. One stored number per limit (the
 * theoretical arrival time), exact retry-after, and no refill timers. Kept pure so the memory store
 * runs it directly and the Redis Lua script (`GCRA` in hold-scripts.ts) mirrors it line by line.
 * `remaining` is what a request could still take now (after this one, when it is allowed); a
 * `cost` of 0 only reads the state (the returned `tatMs` is then the stored one).
 */
export function gcraStep(
  tatMs: number | undefined,
  intervalMs: number,
  toleranceMs: number,
  cost: number,
  nowMs: number,
): { decision: Omit<RateDecision, "limit">; tatMs: number | undefined } {
  const tat = Math.max(tatMs ?? nowMs, nowMs);
  const newTat = tat + intervalMs * cost;
  const allowAt = newTat - toleranceMs;
  if (allowAt > nowMs) {
    return {
      decision: {
        allowed: false,
        remaining: Math.max(0, Math.floor((nowMs - tat + toleranceMs) / intervalMs)),
        resetMs: Math.ceil(tat - nowMs),
        retryAfterMs: Math.ceil(allowAt - nowMs),
      },
      tatMs,
    };
  }
  return {
    decision: {
      allowed: true,
      remaining: Math.max(0, Math.floor((nowMs - allowAt) / intervalMs)),
      resetMs: Math.ceil(newTat - nowMs),
      retryAfterMs: 0,
    },
    tatMs: cost === 0 ? tatMs : newTat,
  };
}

/**
 * The request rate of a key: with emission interval T = 1000 / rps and tolerance tau = T * burst,
 * a request at `now` is allowed when max(tat, now) + T - tau <= now.
 */
export function gcra(
  tatMs: number | undefined,
  rps: number,
  burst: number,
  nowMs: number,
): { decision: RateDecision; tatMs: number | undefined } {
  const interval = 1000 / rps;
  const step = gcraStep(tatMs, interval, interval * burst, 1, nowMs);
  return { decision: { ...step.decision, limit: burst }, tatMs: step.tatMs };
}

/** A minute: the window of a tokens-per-minute limit, whose budget holds one minute's tokens. */
export const TOKEN_WINDOW_MS = 60_000;

/**
 * The token budget of a key with a tokens-per-minute limit, as the same GCRA in tokens: one token
 * per 60,000 / tpm ms, and a whole minute's tokens at once. A request for more than a minute's
 * tokens takes the whole minute, once the budget is full, so that no call is refused for good;
 * `taken` says what it took. `tokens` 0 only reads the budget.
 */
export function tokenStep(
  tatMs: number | undefined,
  tokensPerMinute: number,
  tokens: number,
  nowMs: number,
): { decision: RateDecision; tatMs: number | undefined; taken: number; msPerToken: number } {
  const msPerToken = TOKEN_WINDOW_MS / tokensPerMinute;
  const taken = Math.min(tokens, tokensPerMinute);
  const step = gcraStep(tatMs, msPerToken, TOKEN_WINDOW_MS, taken, nowMs);
  return { decision: { ...step.decision, limit: tokensPerMinute }, tatMs: step.tatMs, taken, msPerToken };
}

/**
 * What a call gives back of the tokens its admission took (`unused` of them, at `msPerToken`),
 * as a reduction of the stored time: no more than the part of its take the budget still counts.
 * Its take moved the stored time to `tatAfterMs`; whatever other calls did since, the budget
 * cannot have refilled past the take before `tatAfterMs`, so everything may come back until then,
 * and nothing once the budget may have been full (and the take forgotten) since. Never gives back
 * more than was taken, whatever other calls took or gave back meanwhile.
 */
export function tokenGiveBackMs(unused: number, msPerToken: number, tatAfterMs: number, nowMs: number): number {
  return Math.max(0, Math.min(unused * msPerToken, tatAfterMs - nowMs));
}
