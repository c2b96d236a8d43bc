/**
 * UTC calendar days of billing periods, as the stores count spend by day. Periods are UTC
 * months ("2026-11") and days UTC dates ("2026-11-03"), so both compare as strings.
 */

import type { DaySpend } from "./store.ts";

/** The UTC date ("YYYY-MM-DD") of an instant: the day a charge made then is counted on. */
export function dateOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/**
 * The first and last UTC dates of a period ("YYYY-MM"), which the Redis settle script clamps
 * its day into: Lua in Redis has no calendar, so the month's length is worked out here.
 */
export function periodBounds(period: string): { first: string; last: string } {
  const [year = 0, month = 0] = period.split("-").map(Number);
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return { first: `${period}-01`, last: `${period}-${String(days).padStart(2, "0")}` };
}

/**
 * The day of `period` a charge settled at `ms` is counted on: its UTC date, or the period's
 * nearest day when that date lies outside it (a call of the 30th settled just after midnight, or
 * a server clock behind the caller's), so that a period's days always sum to its spend.
 */
export function dayInPeriod(ms: number, period: string): string {
  const { first, last } = periodBounds(period);
  const date = dateOf(ms);
  if (date < first) return first;
  return date > last ? last : date;
}

/** Day totals as `spendByDay` answers them: only days that were charged, ascending by date. */
export function daySpends(totals: Iterable<readonly [string, number]>): DaySpend[] {
  return [...totals]
    .filter(([, spent]) => spent > 0)
    .map(([date, spentUsdMicros]) => ({ date, spentUsdMicros }))
    .sort((a, b) => (a.date < b.date ? -1 : 1));
}
