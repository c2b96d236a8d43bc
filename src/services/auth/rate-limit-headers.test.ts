import { describe, expect, it } from "vitest";
import { formatResetDuration, rateLimitHeaders } from "./rate-limit-headers.ts";

describe("x-ratelimit headers", () => {
  it("writes delays as OpenAI does (Go durations), rounding up to a whole millisecond", () => {
    const cases: Array<[number, string]> = [
      [0, "0s"],
      [-5, "0s"],
      [0.2, "1ms"],
      [20, "20ms"],
      [999, "999ms"],
      [1_000, "1s"],
      [1_500, "1.5s"],
      [34_200, "34.2s"],
      [59_999, "59.999s"],
      [60_000, "1m0s"],
      [360_000, "6m0s"],
      [61_500, "1m1.5s"],
      [3_600_000, "1h0m0s"],
      [3_723_500, "1h2m3.5s"],
    ];
    expect(cases.map(([ms]) => formatResetDuration(ms))).toEqual(cases.map(([, text]) => text));
  });

  it("adds the token headers only for a decision with a token budget", () => {
    const requests = { allowed: true, limit: 10, remaining: 9, resetMs: 100, retryAfterMs: 0 };
    expect(rateLimitHeaders(requests)).toEqual({
      "x-ratelimit-limit-requests": "10",
      "x-ratelimit-remaining-requests": "9",
      "x-ratelimit-reset-requests": "100ms",
    });
    const tokens = { allowed: false, limit: 10_000, remaining: 250, resetMs: 360_000, retryAfterMs: 3_000 };
    expect(rateLimitHeaders({ ...requests, tokens })).toMatchObject({
      "x-ratelimit-limit-tokens": "10000",
      "x-ratelimit-remaining-tokens": "250",
      "x-ratelimit-reset-tokens": "6m0s",
    });
  });
});
