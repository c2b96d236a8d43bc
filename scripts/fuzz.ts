import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { startApp } from "../src/app.ts";
import { loadConfig } from "../src/config/index.ts";
import { silentLogger } from "../src/logger.ts";
import type { Family } from "../test/fuzz/case-arbitraries.ts";
import {
  checkAlive,
  fuzzProperty,
  installProcessGuard,
  newStats,
  prepareTarget,
  type FuzzStats,
} from "../test/fuzz/runner.ts";

/**
 * `npm run fuzz`: issue 7's fuzzer at full size. Starts Sluice in this process (memory store,
 * or REDIS_URL's), sends `--runs` cases (100,000 by default) of every kind against the HTTP
 * edge and the Connect core, and checks each against its documented answer, with a progress
 * bar on stderr. The run goes on past failures so that the summary counts them all; then the
 * first failure is replayed through fast-check to shrink it. Exits 1 on any failure.
 *
 *   npm run fuzz -- --runs 20000 --seed 42 --family core
 */
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "100000" },
    seed: { type: "string" },
    family: { type: "string", default: "all" },
    "no-shrink": { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);
const seed = values.seed !== undefined ? Number(values.seed) : randomBytes(4).readInt32BE(0);
const family = values.family as Family;
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed) || !["edge", "core", "all"].includes(family)) {
  console.error("usage: npm run fuzz -- [--runs N] [--seed S] [--family edge|core|all] [--no-shrink]");
  process.exit(2);
}

const guard = installProcessGuard();
const adminToken = randomBytes(24).toString("base64url");
const app = await startApp(
  loadConfig({
    PORT: "0",
    GRPC_PORT: "0",
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    SLUICE_ADMIN_TOKEN: adminToken,
    SLUICE_LOG: "silent",
    SLUICE_SHUTDOWN_GRACE_MS: "0",
    SLUICE_DEV_BOOTSTRAP: "off",
    REDIS_URL: process.env.REDIS_URL,
  }),
  { logger: silentLogger },
);
if (!app.coreUrl) throw new Error("no core");
const admin = createClient(AdminService, createGrpcTransport({ baseUrl: app.coreUrl }));
const target = await prepareTarget({ edgeUrl: app.edgeUrl, coreUrl: app.coreUrl }, admin, {
  authorization: `Bearer ${adminToken}`,
});

/** The progress bar: in place on a terminal, a line every 5% otherwise. */
function progress(stats: FuzzStats, total: number, started: number): () => void {
  const tty = process.stderr.isTTY;
  let lastDraw = 0;
  let lastStep = -1;
  return () => {
    const now = Date.now();
    const done = stats.done;
    const step = Math.floor((done / total) * 20);
    if (tty ? now - lastDraw < 100 && done < total : step === lastStep) return;
    lastDraw = now;
    lastStep = step;
    const rate = done / Math.max(0.001, (now - started) / 1000);
    const width = 30;
    const filled = Math.round((done / total) * width);
    const eta = rate > 0 ? Math.round((total - done) / rate) : 0;
    const line =
      `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} ${((done / total) * 100).toFixed(1)}% ` +
      `${rate.toFixed(0)}/s eta ${eta}s failures ${stats.failures.length}`;
    process.stderr.write(tty ? `\r${line}\u001b[K` : `${line}\n`);
  };
}

const table = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, n] of [...m].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(7)}  ${k}`);
};

console.error(`fuzzing ${family} with ${runs} cases, seed ${seed} (edge ${app.edgeUrl}, core ${app.coreUrl})`);
const stats = newStats();
const started = Date.now();
const tick = progress(stats, runs, started);
await fc.check(fuzzProperty(target, family, guard, stats, { keepGoing: true, aliveEvery: 200, onCase: tick }), {
  numRuns: runs,
  seed,
});
if (process.stderr.isTTY) process.stderr.write("\n");
let aliveAtEnd = "yes";
try {
  await checkAlive(target);
} catch (err) {
  aliveAtEnd = String(err);
}
const seconds = (Date.now() - started) / 1000;

console.log(
  `\n${stats.done} cases in ${seconds.toFixed(1)} s (${(stats.done / seconds).toFixed(0)} cases/s), seed ${seed}, ` +
    `${stats.failures.length} failures; /healthz at the end: ${aliveAtEnd}; ` +
    `process problems: ${guard.problems.length}`,
);
console.log("\ncases by kind (count, mean ms)");
for (const [k, n] of [...stats.byKind].sort((a, b) => b[1] - a[1]))
  console.log(`  ${String(n).padStart(7)}  ${((stats.msByKind.get(k) ?? 0) / n).toFixed(1).padStart(7)} ms  ${k}`);
table("answers", stats.byAnswer);

const groups = new Map<string, { count: number; first: FuzzStats["failures"][number] }>();
for (const f of stats.failures) {
  const key = `${f.kind}: ${f.message.split("\n").slice(0, 2).join(" / ")}`;
  const g = groups.get(key);
  if (g) g.count += 1;
  else groups.set(key, { count: 1, first: f });
}
if (groups.size > 0) {
  console.log("\nfailures, grouped (count, first case):");
  for (const [key, g] of groups)
    console.log(
      `\n  ${g.count} × ${key}\n    case #${g.first.index}: ${g.first.description.slice(0, 1500)}\n    ` +
        g.first.message.split("\n").join("\n    "),
    );
}
for (const p of guard.problems) console.log(`\nprocess problem: ${p}`);

const first = stats.failures[0];
if (first && !values["no-shrink"]) {
  console.error(`\nshrinking case #${first.index} ...`);
  const replay = newStats();
  const details = await fc.check(
    fuzzProperty(target, family, guard, replay, { keepGoing: false, aliveEvery: Number.MAX_SAFE_INTEGER }),
    { seed, path: String(first.index), numRuns: runs },
  );
  console.log(
    details.failed
      ? `\nshrunk counterexample:\n${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}`
      : "\nthe first failure did not happen again on replay (timing-dependent)",
  );
}
if (stats.failures.length > 0 || guard.problems.length > 0 || aliveAtEnd !== "yes") {
  console.log(`\nFAILED. Reproduce with: npm run fuzz -- --seed ${seed} --runs ${runs} --family ${family}`);
}

guard.dispose();
target.h2.close();
await app.close();
process.exit(stats.failures.length > 0 || guard.problems.length > 0 || aliveAtEnd !== "yes" ? 1 : 0);
