import { describe, expect, it } from "vitest";
import { forecastCap } from "./forecast.ts";

const at = (iso: string) => Date.parse(iso);

describe("forecastCap", () => {
  it("divides spend by the elapsed days, today's fraction included", () => {
    // 2026-11-11 12:00 is 10.5 days into November.
    const nowMs = at("2026-11-11T12:00:00Z");
    expect(forecastCap({ spentUsdMicros: 2_100_000, capUsdMicros: 10_000_000, nowMs })).toEqual({
      burnRateUsdMicrosPerDay: 200_000,
      // 7.9 M left at 0.2 M a day is 39.5 days away: after November.
    });
    expect(forecastCap({ spentUsdMicros: 2_100_000, capUsdMicros: 4_200_000, nowMs })).toEqual({
      burnRateUsdMicrosPerDay: 200_000,
      // 2.1 M left takes 10.5 days: 2026-11-22 00:00, exactly.
      capReachedDate: "2026-11-22",
    });
  });

  it("rounds the rate down and lands a reach just before midnight on that day", () => {
    const nowMs = at("2026-11-04T00:00:00Z"); // three days in
    const forecast = forecastCap({ spentUsdMicros: 10, capUsdMicros: 20, nowMs });
    expect(forecast).toEqual({ burnRateUsdMicrosPerDay: 3, capReachedDate: "2026-11-07" });
    // One micro less of cap: reached a little before the 7th begins.
    expect(forecastCap({ spentUsdMicros: 10, capUsdMicros: 19, nowMs }).capReachedDate).toBe("2026-11-06");
  });

  it("counts the first day as a whole day, so one early call does not project a day's spend", () => {
    const nowMs = at("2026-11-01T00:06:00Z"); // six minutes into the month
    expect(forecastCap({ spentUsdMicros: 1_000, capUsdMicros: 10_000, nowMs })).toEqual({
      burnRateUsdMicrosPerDay: 1_000,
      capReachedDate: "2026-11-10",
    });
    // At midnight exactly nothing has elapsed; still one day.
    const midnight = forecastCap({ spentUsdMicros: 500, capUsdMicros: 1_000, nowMs: at("2026-11-01T00:00:00Z") });
    expect(midnight).toEqual({ burnRateUsdMicrosPerDay: 500, capReachedDate: "2026-11-02" });
  });

  it("says today when the cap is reached already, and past it", () => {
    const nowMs = at("2026-11-20T08:00:00Z");
    for (const spent of [5_000_000, 6_000_000]) {
      expect(forecastCap({ spentUsdMicros: spent, capUsdMicros: 5_000_000, nowMs }).capReachedDate).toBe("2026-11-20");
    }
  });

  it("has no date without spend or without a cap, but a rate without a cap", () => {
    const nowMs = at("2026-11-20T00:00:00Z");
    expect(forecastCap({ spentUsdMicros: 0, capUsdMicros: 5_000_000, nowMs })).toEqual({ burnRateUsdMicrosPerDay: 0 });
    expect(forecastCap({ spentUsdMicros: 0, capUsdMicros: 0, nowMs })).toEqual({ burnRateUsdMicrosPerDay: 0 });
    expect(forecastCap({ spentUsdMicros: 1_900_000, capUsdMicros: undefined, nowMs })).toEqual({
      burnRateUsdMicrosPerDay: 100_000,
    });
  });

  it("stops at the end of the month: the last day counts, the 1st of the next does not", () => {
    // 30 days into November at noon of the 30th is 29.5 days; 2.95 M spent is 0.1 M a day.
    const nowMs = at("2026-11-30T12:00:00Z");
    expect(forecastCap({ spentUsdMicros: 2_950_000, capUsdMicros: 2_999_999, nowMs }).capReachedDate).toBe(
      "2026-11-30",
    );
    // Exactly 12 h more reaches it at December's first instant: not this period.
    expect(forecastCap({ spentUsdMicros: 2_950_000, capUsdMicros: 3_000_000, nowMs })).toEqual({
      burnRateUsdMicrosPerDay: 100_000,
    });
    // December starts a new period, with its own first day.
    const december = forecastCap({ spentUsdMicros: 0, capUsdMicros: 3_000_000, nowMs: at("2026-12-01T00:00:01Z") });
    expect(december).toEqual({ burnRateUsdMicrosPerDay: 0 });
  });

  it("knows February's length, leap years included", () => {
    // Ten days into February at 0.1 M a day, with 1.85 M of cap left: 18.5 days on is noon on the 29th.
    const leap = at("2028-02-11T00:00:00Z");
    expect(forecastCap({ spentUsdMicros: 1_000_000, capUsdMicros: 2_850_000, nowMs: leap }).capReachedDate).toBe(
      "2028-02-29",
    );
    // In 2027 the same spend reaches the cap at noon on March 1st: after the period.
    const common = at("2027-02-11T00:00:00Z");
    expect(forecastCap({ spentUsdMicros: 1_000_000, capUsdMicros: 2_850_000, nowMs: common })).toEqual({
      burnRateUsdMicrosPerDay: 100_000,
    });
    expect(forecastCap({ spentUsdMicros: 1_000_000, capUsdMicros: 2_750_000, nowMs: common }).capReachedDate).toBe(
      "2027-02-28",
    );
  });
});
