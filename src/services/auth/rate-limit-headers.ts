import type { RateDecision } from "../../store/store.ts";

/**
 * A delay as OpenAI writes its `x-ratelimit-reset-*` headers, which is Go's duration format:
 * "20ms" under a second, then "1s", "1.5s", "6m0s", "1h2m3.5s" (whole milliseconds, rounded up;
 * "0s" for none), so clients that parse OpenAI's headers parse Sluice's.
 */
export function formatResetDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms));
  if (total === 0) return "0s";
  if (total < 1000) return `${total}ms`;
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const seconds = `${((total % 60_000) / 1000).toFixed(3).replace(/\.?0+$/, "")}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  return minutes > 0 ? `${minutes}m${seconds}` : seconds;
}

/**
 * The `x-ratelimit-*` headers of a rate-limit decision, in OpenAI's names and format: the request
 * rate always, and for a chat call of a key with a tokens-per-minute limit its token budget too
 * (`-tokens`: the limit, the tokens left, and the time until the budget is full again).
 */
export function rateLimitHeaders(d: RateDecision & { tokens?: RateDecision }): Record<string, string> {
  return {
    "x-ratelimit-limit-requests": String(d.limit),
    "x-ratelimit-remaining-requests": String(d.remaining),
    "x-ratelimit-reset-requests": formatResetDuration(d.resetMs),
    ...(d.tokens && {
      "x-ratelimit-limit-tokens": String(d.tokens.limit),
      "x-ratelimit-remaining-tokens": String(d.tokens.remaining),
      "x-ratelimit-reset-tokens": formatResetDuration(d.tokens.resetMs),
    }),
  };
}
