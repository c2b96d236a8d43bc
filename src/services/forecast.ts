import { dateOf } from "../store/days.ts";
import { msUntilNextPeriod } from "./completion/pricing.ts";

const DAY_MS = 86_400_000;

/** Where a period's spend is heading at its pace so far: GetBalance's forecast fields. */
export interface CapForecast {
  /** Spent ÷ the days elapsed in the period (today's fraction included, at least one day), rounded down. */
  burnRateUsdMicrosPerDay: number;
  /** The UTC date ("YYYY-MM-DD") spend reaches the cap at that rate; unset as `forecastCap` says. */
  capReachedDate?: string;
}

/** What the forecast reads: the period's spend so far, the cap (unset while onboarding), and the time. */
export interface ForecastInput {
  spentUsdMicros: number;
  capUsdMicros: number | undefined;
  nowMs: number;
}

/**
 * Extrapolates this period's spend in a straight line, so a holder can see whether the cap will stop their
 * calls before the month ends, and when. The rate is the period's spend over its elapsed time (counted as a
 * day at least, so that the first minutes of a month do not project a day's spend from one call); the date
 * is when spent plus that rate times the time from now reaches the cap: today when it already has, unset
 * when there is no cap, nothing is spent, or the period ends first. Pure, so its edges (a month's first and
 * last day, February in a leap year) are tested on their own.
 */
export function forecastCap({ spentUsdMicros: spent, capUsdMicros: cap, nowMs }: ForecastInput): CapForecast {
  const now = new Date(nowMs);
  const periodStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const elapsedMs = Math.max(DAY_MS, nowMs - periodStart);
  const burnRateUsdMicrosPerDay = Math.floor((spent * DAY_MS) / elapsedMs);
  if (cap === undefined || spent <= 0) return { burnRateUsdMicrosPerDay };
  if (spent >= cap) return { burnRateUsdMicrosPerDay, capReachedDate: dateOf(nowMs) };
  // At `spent` per `elapsedMs`, the rest of the cap takes (cap - spent) * elapsedMs / spent more.
  const reachedMs = Math.floor(nowMs + ((cap - spent) * elapsedMs) / spent);
  if (reachedMs >= nowMs + msUntilNextPeriod(nowMs)) return { burnRateUsdMicrosPerDay };
  return { burnRateUsdMicrosPerDay, capReachedDate: dateOf(reachedMs) };
}
