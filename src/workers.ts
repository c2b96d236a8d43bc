import cluster, { type Worker } from "node:cluster";
import { availableParallelism } from "node:os";
import type { Config } from "./config/index.ts";
import type { Logger } from "./logger.ts";

/** What a worker tells the primary once its servers listen. */
interface Started {
  type: "sluice-started";
  edgeUrl: string;
  coreUrl: string | undefined;
}

const isStarted = (m: unknown): m is Started =>
  typeof m === "object" && m !== null && (m as { type?: unknown }).type === "sluice-started";

/**
 * How many processes serve the ports. The memory store lives in one process, so it runs
 * one whatever `SLUICE_WORKERS` says, and says why; shared state (Redis) or no state (an
 * edge only) lets every core take calls.
 */
export function workerCount(config: Config, logger: Logger): number {
  const wanted = config.SLUICE_WORKERS === "auto" ? availableParallelism() : config.SLUICE_WORKERS;
  const shared = config.REDIS_URL !== undefined || config.CORE_URL !== undefined;
  if (wanted > 1 && !shared) {
    logger.warn("one process: the memory store cannot be shared by workers; set REDIS_URL to use SLUICE_WORKERS", {
      workers: wanted,
    });
    return 1;
  }
  return wanted;
}

/** Whether this process is a worker forked by `runPrimary`. */
export const isWorker = (): boolean => cluster.isWorker;

/** Tells the primary that this worker listens (a no-op outside a cluster). */
export function reportStarted(edgeUrl: string, coreUrl: string | undefined): void {
  if (cluster.isWorker) process.send?.({ type: "sluice-started", edgeUrl, coreUrl } satisfies Started);
}

/**
 * Runs the primary of `n` workers: it forks them (they share the listening ports through
 * node:cluster), prints the start line once all listen, restarts a worker that dies, and on
 * SIGTERM or SIGINT passes the signal on and exits once every worker has stopped gracefully.
 */
export function runPrimary(
  n: number,
  logger: Logger,
  onStarted: (s: { edgeUrl: string; coreUrl: string | undefined }) => void,
): void {
  let stopping = false;
  let started = 0;
  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on("message", (m: unknown) => {
      if (!isStarted(m)) return;
      started += 1;
      if (started === n) onStarted(m);
    });
    return worker;
  };
  cluster.on("exit", (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
      return;
    }
    logger.error("worker died; starting another", { pid: worker.process.pid, code, signal });
    fork();
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info("stopping workers", { signal });
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill(signal);
  };
  process.once("SIGINT", () => stop("SIGINT"));
  process.once("SIGTERM", () => stop("SIGTERM"));
  for (let i = 0; i < n; i++) fork();
  logger.info("sluice primary started", { workers: n });
}
