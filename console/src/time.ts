/**
 * Times as the console prints them: UTC, the zone billing periods and daily totals use, so a record's time
 * and the day it counts on always agree.
 */
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";

/** `2026-11-03 14:05:09 UTC`. */
export function formatUtc(date: Date): string {
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** A message's time as `formatUtc` prints it, or a dash when the message has none. */
export function formatTime(time: Timestamp | undefined): string {
  return time ? formatUtc(timestampDate(time)) : "—";
}

/** `2026-11-03`, the UTC date of a time, for file names. */
export function utcDate(date: Date = new Date()): string {
  return date.toISOString().slice(0, 10);
}

/** Resolves after `ms` milliseconds; used only to honour a server's retry delay. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
