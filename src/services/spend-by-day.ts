import { dateOf } from "../store/days.ts";
import type { AccountRecord, DaySpend, Store } from "../store/store.ts";
import { periodOf } from "./completion/pricing.ts";

/**
 * A period's spend day by day, with the cap it runs against: the answer of both Billing's and
 * Admin's GetSpendByDay (their messages have the same fields), built once here so that a
 * customer's chart and an operator's can never disagree.
 */
export interface SpendByDay {
  period: string;
  days: Array<{ date: string; spentUsdMicros: bigint }>;
  spendCapUsdMicros?: bigint;
  spentUsdMicros: bigint;
  reservedUsdMicros: bigint;
}

/**
 * Every day of `period` from its first to `today`, those without spend at 0. A day the store
 * counted after `today` (a Redis server clock a little ahead of this process's at midnight) is
 * included too, with the days before it, so the days shown hold all the spend counted by day.
 */
function everyDay(period: string, today: string, charged: DaySpend[]): SpendByDay["days"] {
  const byDate = new Map(charged.map((d) => [d.date, d.spentUsdMicros]));
  const last = charged.reduce((max, d) => (d.date > max ? d.date : max), today);
  const days: SpendByDay["days"] = [];
  for (let day = 1; day <= 31; day++) {
    const date = `${period}-${String(day).padStart(2, "0")}`;
    if (date > last) break;
    days.push({ date, spentUsdMicros: BigInt(byDate.get(date) ?? 0) });
  }
  return days;
}

/**
 * The account's current period (the UTC month of `nowMs`) day by day, with its cap and its
 * balance (`Store.balance`). Spend charged before the store kept day totals counts in
 * `spentUsdMicros` but on no day, as the protos say.
 * @throws `service_unavailable` (Redis).
 */
export async function spendByDay(
  store: Store,
  account: Pick<AccountRecord, "id" | "spendCapUsdMicros">,
  nowMs: number,
): Promise<SpendByDay> {
  const period = periodOf(nowMs);
  const [charged, balance] = await Promise.all([
    store.spendByDay({ accountId: account.id, period }),
    store.balance({ accountId: account.id, period, nowMs }),
  ]);
  return {
    period,
    days: everyDay(period, dateOf(nowMs), charged),
    ...(account.spendCapUsdMicros !== undefined && { spendCapUsdMicros: BigInt(account.spendCapUsdMicros) }),
    spentUsdMicros: BigInt(balance.spentUsdMicros),
    reservedUsdMicros: BigInt(balance.reservedUsdMicros),
  };
}
