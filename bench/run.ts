/**
 * `npm run bench`: runs every benchmark one after the other, each in its own process so
 * they do not disturb each other's heap or JIT state.
 */
import { spawnSync } from "node:child_process";

for (const file of ["bench/extractive.bench.ts", "bench/http.bench.ts", "bench/upstream.bench.ts"]) {
  console.log(`\n### ${file}`);
  const run = spawnSync(process.execPath, [file], { stdio: "inherit" });
  if (run.status !== 0) process.exit(run.status ?? 1);
}
