/**
 * Fails when the committed `console/dist` is not exactly what `npm run console:build` makes of the sources,
 * or when the first load (index.html plus the scripts and stylesheets it references) passes the size budget.
 *
 * The server serves `console/dist` as it is committed, so a source change without a rebuild would ship a
 * stale console; this is `scripts/check-gen.sh` for the console. Usage: `npm run console:check`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "vite";

const HERE = import.meta.dirname;
const DIST = join(HERE, "dist");
/** The first-load budget, gzipped, in bytes (200 kB). */
const BUDGET = 200_000;

/** Every file under `dir`, as paths relative to it, sorted. */
function files(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, e.name);
      if (e.isDirectory()) walk(path);
      else out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

/** The files that differ between two trees: missing on either side or with other bytes. */
function differences(committed: string, fresh: string): string[] {
  let committedFiles: string[] = [];
  try {
    committedFiles = files(committed);
  } catch {
    return ["console/dist is missing"];
  }
  const freshFiles = files(fresh);
  const all = [...new Set([...committedFiles, ...freshFiles])].sort();
  return all.flatMap((f) => {
    if (!committedFiles.includes(f)) return [`${f}: built but not committed`];
    if (!freshFiles.includes(f)) return [`${f}: committed but no longer built`];
    return readFileSync(join(committed, f)).equals(readFileSync(join(fresh, f))) ? [] : [`${f}: content differs`];
  });
}

/** The gzipped sizes of index.html and every local script and stylesheet it references. */
function firstLoad(dir: string): { file: string; gzipped: number }[] {
  const html = readFileSync(join(dir, "index.html"), "utf8");
  const referenced = [...html.matchAll(/(?:src|href)="\/console\/([^"]+\.(?:js|css))"/g)].map((m) => m[1] ?? "");
  return ["index.html", ...referenced].map((file) => ({
    file,
    gzipped: gzipSync(readFileSync(join(dir, file)), { level: 9 }).length,
  }));
}

const kB = (bytes: number) => `${(bytes / 1000).toFixed(1)} kB`;

const out = mkdtempSync(join(tmpdir(), "sluice-console-"));
try {
  await build({
    configFile: join(HERE, "vite.config.ts"),
    logLevel: "warn",
    build: { outDir: out, emptyOutDir: true },
  });
  let failed = false;
  const diff = differences(DIST, out);
  if (diff.length > 0) {
    console.error("console/dist is stale: run 'npm run console:build' and commit the result");
    for (const d of diff.slice(0, 20)) console.error(`  ${d}`);
    failed = true;
  } else {
    console.log("console/dist is fresh");
  }
  const load = firstLoad(out);
  const total = load.reduce((sum, f) => sum + f.gzipped, 0);
  const parts = load.map((f) => `${f.file} ${kB(f.gzipped)}`).join(", ");
  console.log(`console first load: ${kB(total)} gzipped of a ${kB(BUDGET)} budget (${parts})`);
  if (load.length < 2) {
    console.error("console/dist/index.html references no script: the build is broken");
    failed = true;
  }
  if (total > BUDGET) {
    console.error(`console first load is ${kB(total)} gzipped, over the ${kB(BUDGET)} budget`);
    failed = true;
  }
  process.exitCode = failed ? 1 : 0;
} finally {
  rmSync(out, { recursive: true, force: true });
}
