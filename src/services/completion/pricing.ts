import type { Model } from "../../engines/models.ts";

/**
 * The price of a call in whole micros, rounded up (DESIGN: "rounded up to a whole micro"),
 * so that many small calls can never add up to less than their true cost.
 */
export function costUsdMicros(
  model: Pick<Model, "inputUsdMicrosPerMillion" | "outputUsdMicrosPerMillion">,
  promptTokens: number,
  completionTokens: number,
): number {
  const numerator = promptTokens * model.inputUsdMicrosPerMillion + completionTokens * model.outputUsdMicrosPerMillion;
  return Math.ceil(numerator / 1_000_000);
}

/** The billing period of an instant: its UTC calendar month, "YYYY-MM". */
export function periodOf(nowMs: number): string {
  const d = new Date(nowMs);
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, "0")}`;
}

/**
 * Milliseconds until the next period begins: the Retry-After of a `spend_cap_exceeded` that the
 * period's spend causes (a refusal that other calls' holds cause is shorter: see spend-cap.ts).
 */
export function msUntilNextPeriod(nowMs: number): number {
  const d = new Date(nowMs);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - nowMs;
}
