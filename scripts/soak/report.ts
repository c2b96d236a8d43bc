import type { AccountFigures, Breach } from "./ledger.ts";
import type { SluiceLogs } from "./sluice-logs.ts";
import { TOLD_KINDS, Tally, type CallResult, type Via } from "./outcomes.ts";

/** Everything the final table shows. */
export interface RunFigures {
  seed: number;
  plannedMs: number;
  trafficMs: number;
  totalMs: number;
  calls: CallResult[];
  faults: Tally;
  crashes: Tally;
  capRaises: number;
  injectorProblems: string[];
  accounts: AccountFigures[];
  breaches: Breach[];
  logs: SluiceLogs;
}

const VIAS: readonly Via[] = ["edge-json", "edge-sse", "grpc-unary", "grpc-stream"];
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Right-aligned columns from rows of cells. */
function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows
    .map((r) => `  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join("  ")}`)
    .join("\n");
}

/** The top `limit` entries of a tally, one per line. */
function topLines(t: Tally, limit: number): string {
  const entries = [...t.counts.entries()].sort((a, b) => b[1] - a[1]);
  const shown = entries.slice(0, limit).map(([k, n]) => `    ${String(n).padStart(6)}  ${k}`);
  if (entries.length > limit) shown.push(`    (${entries.length - limit} more kinds)`);
  return shown.join("\n");
}

/**
 * The soak's figures, meant to be pasted into the README: calls by path and outcome, what the
 * error statuses and leave stages were, faults, each account's ledger, and every breach.
 */
export function formatFigures(f: RunFigures): string {
  const out: string[] = [];
  const n = f.calls.length;
  out.push(
    `Sluice soak, seed ${f.seed}: ${secs(f.trafficMs)} of traffic (asked ${secs(f.plannedMs)}), ` +
      `${secs(f.totalMs)} in all`,
  );
  out.push(
    `Calls: ${n} (${(n / Math.max(1, f.trafficMs / 1000)).toFixed(1)}/s), by path and what the client was told:`,
  );
  const rows: string[][] = [["", ...TOLD_KINDS, "all"]];
  for (const via of VIAS) {
    const mine = f.calls.filter((c) => c.via === via);
    rows.push([via, ...TOLD_KINDS.map((k) => String(mine.filter((c) => c.told === k).length)), String(mine.length)]);
  }
  rows.push(["all", ...TOLD_KINDS.map((k) => String(f.calls.filter((c) => c.told === k).length)), String(n)]);
  out.push(table(rows));
  const withId = f.calls.filter((c) => c.id !== undefined).length;
  const abortsAfterChunks = f.calls.filter((c) => c.told === "spend-cap-abort" && c.chunks > 0).length;
  out.push(`  ${withId} calls saw their completion id; ${abortsAfterChunks} spend-cap aborts after chunks`);
  const statuses = new Tally();
  const left = new Tally();
  const odd = new Tally();
  for (const c of f.calls) {
    if (c.told === "error-status") statuses.add(`${c.detail} [${c.model}]`);
    if (c.told === "client-left" || c.told === "cut-off") left.add(`${c.told}: ${c.detail}`);
    if (c.told === "malformed" || c.told === "internal-error") odd.add(`${c.told}: ${c.detail}`);
  }
  out.push("Error statuses [model]:", topLines(statuses, 20));
  out.push("Left and cut off:", topLines(left, 16));
  if (odd.total() > 0) out.push("Internal errors and malformed answers:", topLines(odd, 10));
  out.push(
    `Faults injected: ${f.faults.total()} (${f.faults.line() || "none"}); cap raises: ${f.capRaises}; ` +
      `processes that exited on their own: ${f.crashes.total() === 0 ? "none" : f.crashes.line()}`,
  );
  for (const p of f.injectorProblems) out.push(`  injector problem: ${p}`);
  if (f.logs.byMessage.total() > 0) {
    out.push("Sluice warn/error log lines (all processes), with one sample each:");
    for (const [key, count] of [...f.logs.byMessage.counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12)) {
      out.push(
        `    ${String(count).padStart(6)}  ${key}`,
        `            ${f.logs.samples.get(key)?.slice(0, 300) ?? ""}`,
      );
    }
  }
  out.push("Ledger by account (micros; ids checked against what clients were told):");
  const lrows: string[][] = [
    [
      "acct",
      "cap",
      "spent",
      "records",
      "record sum",
      "partials",
      "partial sum",
      "reserved",
      "holds",
      "told ok",
      "aborts",
      "not billed",
      "left/cut",
      "unseen",
    ],
  ];
  for (const a of f.accounts) {
    lrows.push([
      String(a.index),
      String(a.cap),
      String(a.spent),
      String(a.records),
      String(a.recordsSum),
      `${a.partials}${a.partialsHash ? "" : "*"}`,
      String(a.partialsSum),
      String(a.reserved),
      String(a.holds),
      String(a.toldSuccess),
      String(a.toldAbort),
      String(a.toldNotBilled),
      String(a.unknownCalls),
      String(a.unseenCharges),
    ]);
  }
  out.push(table(lrows));
  if (f.accounts.some((a) => !a.partialsHash)) {
    out.push(
      "  * no partials HASH (sluice:{a:<id>}:p:<period>:partials) for this account; read as empty" +
        (f.accounts.some((a) => a.partialCounter !== undefined)
          ? ` (older :partial counters: ${f.accounts.map((a) => a.partialCounter ?? 0n).join(", ")})`
          : ""),
    );
  }
  out.push(f.breaches.length === 0 ? "Breaches: none" : `Breaches: ${f.breaches.length}`);
  for (const b of f.breaches)
    out.push(`  [${b.account < 0 ? "cluster" : `account ${b.account}`}] ${b.check}: ${b.message}`);
  return out.join("\n");
}

/** The progress line: elapsed of total, calls by outcome so far, faults so far. */
export function progressLine(
  elapsedMs: number,
  totalMs: number,
  calls: Tally,
  inFlight: number,
  faults: Tally,
): string {
  const clock = (ms: number) =>
    `${Math.floor(ms / 60_000)}:${String(Math.floor((ms % 60_000) / 1000)).padStart(2, "0")}`;
  return (
    `${clock(elapsedMs)}/${clock(totalMs)}: calls ${calls.total()} (${calls.line() || "none yet"}), ` +
    `in flight ${inFlight}; ` +
    `faults ${faults.total()} (${faults.line() || "none yet"})`
  );
}
