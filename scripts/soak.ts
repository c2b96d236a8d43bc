/**
 * `npm run soak`: mixed traffic from four Sluice processes sharing one Redis, with clients
 * leaving at every stage and Redis, upstreams and Sluice processes frozen and killed, then a
 * check of every account's ledger by completion id (see scripts/soak/ledger.ts). Exits 1 on
 * any breach, 2 when the soak itself fails, 0 otherwise; `--seconds N` for short runs.
 */
import { Admin } from "./soak/accounts.ts";
import { parseArgs, UsageError, type SoakArgs } from "./soak/args.ts";
import { killAllChildrenSync } from "./soak/child.ts";
import { ADMIN_TOKEN, RESERVATION_TTL_MS, removeTempDirsSync, startCluster, type Cluster } from "./soak/cluster.ts";
import { FaultInjector } from "./soak/faults.ts";
import { completionClient } from "./soak/grpc-call.ts";
import { checkLedger } from "./soak/ledger.ts";
import { Tally, type CallResult } from "./soak/outcomes.ts";
import { formatFigures, progressLine } from "./soak/report.ts";
import { createRng } from "./soak/rng.ts";
import { runTraffic } from "./soak/traffic.ts";

const ACCOUNTS = 5;
const PROGRESS_EVERY_MS = 10_000;
const TOP_UP_EVERY_MS = 1_500;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let cluster: Cluster | undefined;
let interrupted = false;
const began = Date.now();
const log = (line: string) => process.stderr.write(`[soak +${((Date.now() - began) / 1000).toFixed(0)}s] ${line}\n`);

// Last resort: whatever happens, no child outlives the soak and no temp dir stays behind.
process.on("exit", () => {
  killAllChildrenSync();
  removeTempDirsSync();
});
process.on("SIGINT", () => {
  if (interrupted) {
    log("second Ctrl-C: stopping at once");
    process.exit(130);
  }
  interrupted = true;
  log("Ctrl-C: ending traffic now and checking the ledger (Ctrl-C again to stop at once)");
});
process.on("SIGTERM", () => process.exit(143));

/** Reads the ledger, retrying a few times: the cluster has just been through faults. */
async function settledLedger(
  admin: Admin,
  c: Cluster,
  accounts: Parameters<typeof checkLedger>[2],
  calls: CallResult[],
) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await checkLedger(admin, c.redisUrl, accounts, calls);
    } catch (err) {
      if (attempt >= 5) throw err;
      log(`reading the ledger failed (${String(err).slice(0, 200)}); retrying`);
      await sleep(2_000);
    }
  }
}

async function soak(args: SoakArgs): Promise<number> {
  const rng = createRng(args.seed);
  log(
    `seed ${args.seed}; ${args.durationMs / 1000} s of traffic, ${args.concurrency} calls in flight; ` +
      "starting Redis, 2 upstreams, 4 Sluice processes",
  );
  const c = await startCluster(args.seed);
  cluster = c;
  const admin = new Admin(
    c.sluices.map((s) => s.coreUrl),
    ADMIN_TOKEN,
  );
  const accounts = await admin.createAccounts(ACCOUNTS, rng.fork());
  log(`cluster up in ${((Date.now() - began) / 1000).toFixed(1)} s (temp dir ${c.dir}); ${accounts.length} accounts`);

  const calls: CallResult[] = [];
  const byOutcome = new Tally();
  const inFlight = { n: 0 };
  const injector = new FaultInjector(c, rng.fork(), log);
  const start = Date.now();
  const stopped = () => interrupted || Date.now() - start >= args.durationMs;
  const progress = setInterval(
    () => log(progressLine(Date.now() - start, args.durationMs, byOutcome, inFlight.n, injector.injected)),
    PROGRESS_EVERY_MS,
  );
  let capRaises = 0;
  const topUps = async () => {
    const r = rng.fork();
    while (!stopped()) {
      await sleep(TOP_UP_EVERY_MS);
      capRaises += await admin.topUp(accounts, r);
    }
  };
  const traffic = runTraffic(
    {
      sluices: c.sluices,
      grpc: c.sluices.map((s) => completionClient(s.coreUrl)),
      accounts,
      down: injector.down,
      rng: rng.fork(),
      record: (r) => {
        calls.push(r);
        byOutcome.add(r.told);
      },
    },
    args.concurrency,
    stopped,
    inFlight,
  );
  try {
    await Promise.all([injector.run(stopped), topUps(), traffic]);
  } finally {
    clearInterval(progress);
  }
  const trafficMs = Date.now() - start;
  log(progressLine(trafficMs, args.durationMs, byOutcome, inFlight.n, injector.injected));
  await injector.heal();
  log(
    `traffic over; waiting ${(RESERVATION_TTL_MS + 2_000) / 1000} s (past the reservation TTL) ` +
      "before reading the ledger",
  );
  await sleep(RESERVATION_TTL_MS + 2_000);
  const { figures, breaches } = await settledLedger(admin, c, accounts, calls);
  // Not ledger breaches, but findings all the same: a process that died on its own, a call the soak could not make.
  for (const [name, n] of injector.crashes.counts)
    breaches.push({
      account: -1,
      check: "no process exits on its own",
      message: `${name} exited ${n} time(s) without a fault`,
    });
  const soakErrors = calls.filter((r) => r.accountIndex < 0);
  if (soakErrors.length > 0)
    breaches.push({
      account: -1,
      check: "every call made",
      message: `${soakErrors.length} calls failed inside the soak, e.g. ${soakErrors[0]?.detail ?? ""}`,
    });
  process.stdout.write(
    `${formatFigures({
      seed: args.seed,
      plannedMs: args.durationMs,
      trafficMs,
      totalMs: Date.now() - began,
      calls,
      faults: injector.injected,
      crashes: injector.crashes,
      capRaises,
      injectorProblems: injector.problems,
      accounts: figures,
      breaches,
      logs: c.logs,
    })}\n`,
  );
  return breaches.length > 0 ? 1 : 0;
}

let code = 2;
try {
  code = await soak(parseArgs(process.argv.slice(2)));
} catch (err) {
  process.stderr.write(
    err instanceof UsageError ? `${err.message}\n` : `soak failed: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  code = 2;
} finally {
  await cluster?.close().catch(() => undefined);
}
process.exit(code);
