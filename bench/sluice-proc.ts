/**
 * One Sluice process (`node src/main.ts`) per benchmark scenario, configured the way issue 8
 * asks: auth, rate limit, reservation, settle and usage record all on, default logging
 * (info, JSON lines to a log file as a deployment would ship them), a models file mapping
 * the benchmark model to the fake upstream, and an account and key created through the Admin
 * API with a cap and a rate limit no benchmark can reach.
 */
import { closeSync, openSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { freePort } from "../test/support/redis-server.ts";
import { processTree, startChild, treeRssKiB } from "./procs.ts";

const ADMIN = "bench-admin-token-0123456789";

/** How a scenario's Sluice is started. */
export interface SluiceOptions {
  label: string;
  modelsFile: string;
  /** Directory for the log file. */
  dir: string;
  redisUrl?: string;
  /** Sets SLUICE_WORKERS; whether Sluice honours it is detected, never assumed. */
  workers?: number;
  /** Extra environment (limits for the open-streams run). */
  env?: Record<string, string>;
}

/** A running Sluice with a key ready to call it. */
export interface SluiceProc {
  edgeUrl: string;
  metricsUrl: string;
  pid: number;
  /** `Bearer <secret>` of a key with a huge rate limit on an account with a huge cap. */
  authorization: string;
  /** Node processes in Sluice's process tree once started (more than 1 only with workers). */
  processes: number;
  /** Log lines that mention workers, for the workers label. */
  workerLogLines: string[];
  logFile: string;
  logBytes(): number;
  rssKiB(): number;
  /**
   * `sluice_redis_commands_total`, NaN when absent or not comparable: with several processes
   * /metrics answers from one of them only, so it would count a share of the calls.
   */
  redisCommands(): Promise<number>;
  close(): Promise<void>;
}

async function waitReady(edgeUrl: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(`${edgeUrl}/readyz`);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // Not listening yet.
    }
    if (performance.now() > deadline) throw new Error(`Sluice at ${edgeUrl} was not ready within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** Starts Sluice, waits until it is ready and creates the benchmark account and key. */
export async function startSluice(options: SluiceOptions): Promise<SluiceProc> {
  const ports = { PORT: await freePort(), GRPC_PORT: await freePort(), METRICS_PORT: await freePort() };
  const logFile = join(options.dir, `sluice-${options.label.replace(/[^a-z0-9]+/gi, "-")}.log`);
  const logFd = openSync(logFile, "w");
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(ports.PORT),
    GRPC_PORT: String(ports.GRPC_PORT),
    METRICS_PORT: String(ports.METRICS_PORT),
    HOST: "127.0.0.1",
    SLUICE_ADMIN_TOKEN: ADMIN,
    SLUICE_DEV_BOOTSTRAP: "off",
    SLUICE_MODELS: options.modelsFile,
    ...(options.redisUrl !== undefined && { REDIS_URL: options.redisUrl }),
    ...(options.workers !== undefined && { SLUICE_WORKERS: String(options.workers) }),
    ...options.env,
  };
  // Default logging, whatever the calling shell has set.
  delete env.SLUICE_LOG;
  if (options.redisUrl === undefined) delete env.REDIS_URL;
  const child = startChild(`Sluice (${options.label})`, ["src/main.ts"], env, logFd);
  closeSync(logFd);
  const edgeUrl = `http://127.0.0.1:${ports.PORT}`;
  try {
    await child.line((l) => l.includes("Sluice edge"), 30_000);
    await waitReady(edgeUrl, 20_000);
    const admin = createClient(AdminService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${ports.GRPC_PORT}` }));
    const headers = { authorization: `Bearer ${ADMIN}` };
    const { account } = await admin.createAccount(
      { onboardingComplete: true, spendCapUsdMicros: 10n ** 15n },
      { headers },
    );
    const { secret } = await admin.createApiKey(
      { accountId: account?.id ?? "", rateLimitRps: 1_000_000, burst: 1_000_000 },
      { headers },
    );
    // Workers may be forked after the start line: with N wanted, a cluster primary makes N + 1
    // processes; look for them for up to 2 s (one process means the variable was not honoured).
    let processes = processTree(child.pid).length;
    for (let i = 0; i < 10 && options.workers !== undefined && processes < options.workers + 1; i++) {
      await sleep(200);
      processes = processTree(child.pid).length;
    }
    const workerLogLines = readFileSync(logFile, "utf8")
      .split("\n")
      .filter((l) => /worker/i.test(l))
      .slice(0, 5);
    const metricsUrl = `http://127.0.0.1:${ports.METRICS_PORT}/metrics`;
    return {
      edgeUrl,
      metricsUrl,
      pid: child.pid,
      authorization: `Bearer ${secret}`,
      processes,
      workerLogLines,
      logFile,
      logBytes: () => {
        try {
          return statSync(logFile).size;
        } catch {
          return 0;
        }
      },
      rssKiB: () => treeRssKiB(child.pid),
      redisCommands: async () => {
        if (processes > 1) return Number.NaN;
        try {
          const text = await (await fetch(metricsUrl)).text();
          return Number(/^sluice_redis_commands_total (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
        } catch {
          return Number.NaN;
        }
      },
      close: () => child.close(),
    };
  } catch (err) {
    await child.close(2_000);
    let tail = "";
    try {
      tail = readFileSync(logFile, "utf8").slice(-2_000);
    } catch {
      /* no log */
    }
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nSluice log tail:\n${tail}`);
  }
}
