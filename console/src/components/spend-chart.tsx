/**
 * This period's spend against the cap, day by day: a uPlot chart of daily spend (bars), spend to date (line)
 * and the cap (dashed line) over the whole month, with a table of the same days as its text alternative.
 * Both the holder's and the operator's `GetSpendByDay` answers fit `SpendByDay`.
 */
import { useEffect, useMemo, useRef } from "preact/hooks";
import uPlot from "uplot";
import { formatUsd, microsToDollars } from "../money.ts";
import { TableWrap } from "./table-wrap.tsx";

/** The fields of a `GetSpendByDayResponse` the chart reads. */
export interface SpendByDay {
  period: string;
  days: readonly { date: string; spentUsdMicros: bigint }[];
  spendCapUsdMicros?: bigint | undefined;
  spentUsdMicros: bigint;
  reservedUsdMicros: bigint;
}

/** One row of the chart and of its table. */
interface DayRow {
  date: string;
  spent: bigint;
  toDate: bigint;
}

/** Each day with its spend and the running total, in date order. */
function dayRows(days: SpendByDay["days"]): DayRow[] {
  let total = 0n;
  return [...days]
    .sort((a, b) => a.date.localeCompare(b.date))
    .map((d) => {
      total += d.spentUsdMicros;
      return { date: d.date, spent: d.spentUsdMicros, toDate: total };
    });
}

/** Unix seconds of a `YYYY-MM-DD` UTC date. */
function utcSeconds(date: string): number {
  return Date.parse(`${date}T00:00:00Z`) / 1000;
}

/** Every day of a `YYYY-MM` period, as unix seconds, so the x axis spans the whole month. */
function monthDays(period: string, rows: readonly DayRow[]): number[] {
  const match = /^(\d{4})-(\d{2})$/.exec(period);
  if (!match) return rows.map((r) => utcSeconds(r.date));
  const year = Number(match[1]);
  const month = Number(match[2]) - 1;
  const count = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return Array.from({ length: count }, (_, i) => Date.UTC(year, month, i + 1) / 1000);
}

/** A CSS custom property of the page, so the canvas follows the stylesheet (and its dark scheme). */
function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#333";
}

/** Axis labels in dollars: whole dollars for whole steps, else cents or as many decimals as the step needs. */
function dollarTicks(_u: uPlot, splits: number[], _axis: number, _space: number, incr: number): string[] {
  const decimals = incr >= 1 ? 0 : Math.min(6, Math.max(2, -Math.floor(Math.log10(incr))));
  return splits.map((v) => `$${v.toFixed(decimals)}`);
}

/** The uPlot data: x, daily spend, spend to date and cap, with gaps after today. */
function chartData(spend: SpendByDay, rows: readonly DayRow[]): uPlot.AlignedData {
  const xs = monthDays(spend.period, rows);
  const byDay = new Map(rows.map((r) => [utcSeconds(r.date), r]));
  const cap = spend.spendCapUsdMicros;
  return [
    xs,
    xs.map((x) => {
      const r = byDay.get(x);
      return r ? microsToDollars(r.spent) : null;
    }),
    xs.map((x) => {
      const r = byDay.get(x);
      return r ? microsToDollars(r.toDate) : null;
    }),
    xs.map(() => (cap === undefined ? null : microsToDollars(cap))),
  ];
}

/** The chart options, coloured from the stylesheet. */
function chartOptions(width: number, spend: SpendByDay): uPlot.Options {
  const text = cssVar("--text");
  const grid = cssVar("--grid");
  const cap = spend.spendCapUsdMicros === undefined ? 0 : microsToDollars(spend.spendCapUsdMicros);
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  return {
    width,
    height: 240,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { y: { range: (_u, _min, max) => [0, Math.max(max, cap) * 1.1 || 1] } },
    axes: [{ ...axis }, { ...axis, size: 72, values: dollarTicks }],
    series: [
      {},
      {
        label: "Spent that day",
        stroke: cssVar("--bar"),
        fill: cssVar("--bar"),
        paths: uPlot.paths.bars?.({ size: [0.7, 24] }),
        points: { show: false },
      },
      { label: "Spent to date", stroke: cssVar("--accent"), width: 2, points: { show: false } },
      { label: "Cap", stroke: cssVar("--danger"), width: 2, dash: [6, 4], points: { show: false } },
    ],
  };
}

/** The uPlot canvas, sized to its container and redrawn when the data changes. */
function Chart({ spend, rows }: { spend: SpendByDay; rows: readonly DayRow[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const plot = new uPlot(chartOptions(el.clientWidth, spend), chartData(spend, rows), el);
    const observer = new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 240 }));
    observer.observe(el);
    return () => {
      observer.disconnect();
      plot.destroy();
    };
  }, [spend, rows]);
  return <div class="chart" ref={box} />;
}

/** A one-sentence summary of the chart, its accessible name. */
function summary(spend: SpendByDay): string {
  const cap = spend.spendCapUsdMicros;
  const against = cap === undefined ? "no cap is set" : `the cap is ${formatUsd(cap)}`;
  return `Spend by day for ${spend.period}: ${formatUsd(spend.spentUsdMicros)} spent so far; ${against}.`;
}

/** The chart, its legend and its table of days. */
export function SpendChart({ spend }: { spend: SpendByDay }) {
  const rows = useMemo(() => dayRows(spend.days), [spend]);
  const daysTotal = rows.at(-1)?.toDate ?? 0n;
  const undated = spend.spentUsdMicros - daysTotal;
  return (
    <figure class="spend-chart">
      <figcaption>{summary(spend)}</figcaption>
      <div role="img" aria-label={summary(spend)}>
        <Chart spend={spend} rows={rows} />
      </div>
      <ul class="legend" aria-hidden="true">
        <li class="legend-bar">Spent that day</li>
        <li class="legend-line">Spent to date</li>
        {spend.spendCapUsdMicros !== undefined && <li class="legend-cap">Cap</li>}
      </ul>
      {undated > 0n && (
        <p class="muted">
          {formatUsd(undated)} of this period's spend was charged before Sluice kept daily totals: it counts in the
          spent figure but on no day.
        </p>
      )}
      <details>
        <summary>Spend by day as a table</summary>
        <TableWrap label="Spend by day table">
          <table>
            <caption>Spend by day, {spend.period} (UTC)</caption>
            <thead>
              <tr>
                <th scope="col">Date</th>
                <th scope="col">Spent that day</th>
                <th scope="col">Spent to date</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.date} data-date={r.date}>
                  <th scope="row">{r.date}</th>
                  <td class="num">{formatUsd(r.spent)}</td>
                  <td class="num">{formatUsd(r.toDate)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      </details>
    </figure>
  );
}
