/**
 * Money in the console is what the RPCs carry: integer US-dollar micros as `bigint`. These helpers only
 * format and parse it; arithmetic stays in `bigint` so no figure drifts through a float.
 */

const MICROS_PER_DOLLAR = 1_000_000n;

/** Groups the whole-dollar digits in threes, so `1234567` reads `1,234,567`. */
function groupThousands(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/**
 * Formats micros as dollars for people: `$1.234567`, `$12.50`, `$1,000.00`. Cents are always shown and
 * trailing zeros past them are trimmed, so a sub-cent charge keeps every digit it has and nothing more.
 */
export function formatUsd(micros: bigint): string {
  const sign = micros < 0n ? "-" : "";
  const abs = micros < 0n ? -micros : micros;
  const whole = abs / MICROS_PER_DOLLAR;
  const fraction = (abs % MICROS_PER_DOLLAR).toString().padStart(6, "0").replace(/0+$/, "").padEnd(2, "0");
  return `${sign}$${groupThousands(whole.toString())}.${fraction}`;
}

/**
 * Formats micros as a plain decimal with all six places (`0.000123`), for machine-read output such as CSV,
 * where a fixed shape matters more than brevity.
 */
export function formatDecimalUsd(micros: bigint): string {
  const sign = micros < 0n ? "-" : "";
  const abs = micros < 0n ? -micros : micros;
  return `${sign}${abs / MICROS_PER_DOLLAR}.${(abs % MICROS_PER_DOLLAR).toString().padStart(6, "0")}`;
}

/**
 * Formats micros as the shortest plain decimal (`12.5`, `10`), to prefill a dollar input with a value that
 * `parseUsd` reads back to the same micros.
 */
export function formatInputUsd(micros: bigint): string {
  return formatDecimalUsd(micros).replace(/\.?0+$/, "");
}

/** What `parseUsd` made of the text: the exact micros, or why the text is not an amount. */
export type ParsedUsd = { ok: true; micros: bigint } | { ok: false; error: string };

/**
 * Parses a dollar amount typed by a person into exact micros by reading the decimal string digit by digit
 * (never through a float): `12.5` is `12500000n`. A leading `$` and thousands commas are allowed; negative
 * amounts and more than six decimal places are refused with a message fit to show next to the input.
 */
export function parseUsd(text: string): ParsedUsd {
  const cleaned = text.trim().replace(/^\$\s*/, "");
  const match = /^(\d{1,3}(?:,\d{3})+|\d+)?(?:\.(\d*))?$/.exec(cleaned);
  if (cleaned === "" || cleaned === "." || !match) {
    return { ok: false, error: "Enter an amount in dollars, such as 25 or 12.50." };
  }
  const whole = (match[1] ?? "0").replaceAll(",", "");
  const fraction = match[2] ?? "";
  if (fraction.length > 6) return { ok: false, error: "Use at most six decimal places (a micro-dollar)." };
  const micros = BigInt(whole) * MICROS_PER_DOLLAR + BigInt(fraction.padEnd(6, "0") || "0");
  if (micros > 9_223_372_036_854_775_807n) return { ok: false, error: "That amount is too large." };
  return { ok: true, micros };
}

/** Micros as a float number of dollars, for chart scales only; figures people read use `formatUsd`. */
export function microsToDollars(micros: bigint): number {
  return Number(micros) / 1_000_000;
}
