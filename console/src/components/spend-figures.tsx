/**
 * The period's figures as the RPCs give them: cap, spent, reserved, and what is left under the cap.
 * Remaining is the one figure the page derives (cap − spent − reserved, never below zero).
 */
import { formatUsd } from "../money.ts";

/** The figures of a period, from `GetBalance`, `GetSpendByDay` or `GetAccount`. */
export interface Figures {
  period: string;
  spendCapUsdMicros?: bigint | undefined;
  spentUsdMicros: bigint;
  reservedUsdMicros: bigint;
}

/** What is left under the cap, floored at zero; nothing when there is no cap. */
export function remainingMicros(f: Figures): bigint | undefined {
  if (f.spendCapUsdMicros === undefined) return undefined;
  const left = f.spendCapUsdMicros - f.spentUsdMicros - f.reservedUsdMicros;
  return left > 0n ? left : 0n;
}

/** The four figures as a description list of labelled stats. */
export function SpendFigures({ figures }: { figures: Figures }) {
  const cap = figures.spendCapUsdMicros;
  const remaining = remainingMicros(figures);
  return (
    <dl class="stats">
      <div>
        <dt>Cap ({figures.period})</dt>
        <dd data-stat="cap">{cap === undefined ? "Not set" : formatUsd(cap)}</dd>
      </div>
      <div>
        <dt>Spent</dt>
        <dd data-stat="spent">{formatUsd(figures.spentUsdMicros)}</dd>
      </div>
      <div>
        <dt>Reserved</dt>
        <dd data-stat="reserved">{formatUsd(figures.reservedUsdMicros)}</dd>
      </div>
      <div>
        <dt>Remaining</dt>
        <dd data-stat="remaining">{remaining === undefined ? "No cap" : formatUsd(remaining)}</dd>
      </div>
    </dl>
  );
}
