/**
 * `npm run bench`: the benchmark suite of issue 8 (see bench/suite.ts). Progress goes to
 * stderr, the markdown report to stdout, and both the JSON results and the markdown to
 * `bench/results/<YYYY-MM-DD>.json` and `.md`. Exits 1 when a scenario failed to run (a
 * missed target is a finding, not a failure).
 *
 * Flags (after `npm run bench --`):
 *   --seconds N   measured window per load scenario (default 3)
 *   --warmup N    warm-up before each window (default 1); each new server process also gets
 *                 2 s of JSON and 2 s of SSE load before its first window
 *   --quick       1 s windows, 0.5 s warm-ups, 2,000 open streams, fewer repetitions
 *   --streams N   open streams for the RSS measurement (default 10000; 0 skips it)
 *   --out DIR     where the results go (default bench/results)
 *
 * The older single-purpose benches (extractive, http, upstream) still run on their own with
 * `node bench/<name>.bench.ts`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { progress } from "./procs.ts";
import { renderMarkdown } from "./report.ts";
import { runSuite } from "./suite.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string" },
    warmup: { type: "string" },
    quick: { type: "boolean", default: false },
    streams: { type: "string" },
    out: { type: "string", default: "bench/results" },
  },
  strict: true,
});

const number = (raw: string | undefined, fallback: number, name: string): number => {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number >= 0, got ${raw}`);
  return n;
};

const quick = values.quick;
const options = {
  seconds: Math.max(0.5, number(values.seconds, quick ? 1 : 3, "seconds")),
  warmupSeconds: number(values.warmup, quick ? 0.5 : 1, "warmup"),
  processWarmupSeconds: quick ? 1 : 2,
  connections: [1, 32],
  streams: Math.floor(number(values.streams, quick ? 2_000 : 10_000, "streams")),
  extractiveIterations: quick ? 3 : 20,
  refusalRuns: quick ? { declared: 5, chunked: 3 } : { declared: 15, chunked: 7 },
  quick,
  command: ["npm run bench", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" "),
};

progress(
  `Sluice benchmark suite: ${options.seconds} s windows after ${options.warmupSeconds} s warm-ups, ` +
    `c = ${options.connections.join(" and ")}, ${options.streams} open streams`,
);
const results = await runSuite(options);
const markdown = renderMarkdown(results);
mkdirSync(values.out, { recursive: true });
const base = join(values.out, results.date);
writeFileSync(`${base}.json`, `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(`${base}.md`, markdown);
process.stdout.write(markdown);
progress(`wrote ${base}.json and ${base}.md`);
for (const t of results.targets)
  progress(`${t.pass === null ? "n/a " : t.pass ? "PASS" : "MISS"} ${t.target}: ${t.measured} (limit ${t.limit})`);
process.exit(results.scenarios.some((s) => s.error !== undefined) ? 1 : 0);
