/**
 * Fails when a tracked source line is longer than the project's 120-character line width.
 *
 * Biome formats to `lineWidth: 120`, but its formatter cannot wrap string literals, template literals or
 * comments, so lines made long by those slip through `biome check`. This script closes that gap: it scans the
 * `.ts`, `.tsx`, `.js` and `.mjs` files that `git ls-files` lists (generated code under `gen/` and
 * `console/dist/` excluded) and
 * exits 1 listing `file:line: length` for every line over the limit. `npm run lint` runs it after Biome.
 *
 * Usage: `node scripts/check-line-length.ts` (Node 24 runs TypeScript natively; no dependencies).
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const MAX = 120;
const EXTENSIONS = [".ts", ".tsx", ".js", ".mjs"];
const root = join(import.meta.dirname, "..");
/** Made by tools and committed: `buf generate` writes gen/, `npm run console:build` (minified) console/dist/. */
const GENERATED = ["gen/", "console/dist/"];

const files = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
  .split("\0")
  .filter((f) => f !== "" && !GENERATED.some((dir) => f.startsWith(dir)) && EXTENSIONS.some((ext) => f.endsWith(ext)));

const offenders: string[] = [];
for (const file of files) {
  let text: string;
  try {
    text = readFileSync(join(root, file), "utf8");
  } catch {
    continue; // tracked but deleted in the working tree
  }
  text.split(/\r?\n/).forEach((line, i) => {
    // Count code points, not UTF-16 units, so a non-BMP character counts once (as awk and editors do).
    const length = [...line].length;
    if (length > MAX) offenders.push(`${file}:${i + 1}: ${length}`);
  });
}

if (offenders.length > 0) {
  console.error(`${offenders.length} line(s) longer than ${MAX} characters:`);
  for (const o of offenders) console.error(`  ${o}`);
  process.exit(1);
}
console.log(`check-line-length: ${files.length} files, no line over ${MAX} characters`);
