import { startApp } from "./app.ts";
import { ConfigError, loadConfig } from "./config/index.ts";
import { bootstrapDevAccount, devBanner, planDevStart } from "./dev-bootstrap.ts";
import { ModelsFileError } from "./engines/models.ts";
import { createLogger, flushLogs } from "./logger.ts";
import { clusterMetricsHandler } from "./metrics-server.ts";
import { createLimitedHttpServer, limitsOf } from "./server-limits.ts";
import { isWorker, reportStarted, runPrimary, workerCount } from "./workers.ts";

/** The line that says where Sluice listens (tests and scripts read it). */
const startLine = (edgeUrl: string, coreUrl: string | undefined) =>
  `Sluice edge on ${edgeUrl}/v1, core (gRPC/Connect/gRPC-Web) on ${coreUrl}\n`;

/**
 * Entry point of `npm start`: one process with the edge and the core, or with
 * `SLUICE_WORKERS` (Redis store or edge only) a primary and that many workers sharing the ports.
 */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.SLUICE_LOG);
  const workers = isWorker() ? 1 : workerCount(config, logger);
  if (workers > 1) {
    runPrimary(workers, logger, ({ edgeUrl, coreUrl }) => {
      flushLogs();
      process.stdout.write(startLine(edgeUrl, coreUrl ?? config.CORE_URL));
    });
    // The primary serves the sum of its workers' metrics; a worker's own would be one at random.
    createLimitedHttpServer(clusterMetricsHandler(), limitsOf(config)).listen(
      config.METRICS_PORT,
      config.HOST ?? "0.0.0.0",
    );
    return;
  }
  // DESIGN: only a developer's first run makes up an admin token, and it then binds loopback.
  const { config: startConfig, madeUpToken } = planDevStart(config);
  const app = await startApp(startConfig, { logger, clusterWorker: isWorker() });

  // Stopping works from the moment the servers listen, the dev bootstrap included.
  let stopping = false;
  const stop = (signal: string) => {
    stopping = true;
    logger.info("stopping", { signal });
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);

  const store = config.REDIS_URL !== undefined ? "redis" : config.CORE_URL !== undefined ? "remote core" : "memory";
  logger.info("sluice started", { edge: app.edgeUrl, core: app.coreUrl, store });
  flushLogs();
  if (isWorker()) reportStarted(app.edgeUrl, app.coreUrl);
  else process.stdout.write(startLine(app.edgeUrl, app.coreUrl ?? config.CORE_URL));

  if (madeUpToken !== undefined && app.coreUrl !== undefined && (await app.store?.hasAccounts()) === false) {
    try {
      const creds = await bootstrapDevAccount(app.coreUrl, madeUpToken);
      flushLogs();
      process.stdout.write(
        devBanner({ edgeUrl: app.edgeUrl, coreUrl: app.coreUrl, publicUrl: app.publicUrl }, creds, madeUpToken),
      );
    } catch (err) {
      // A signal during the bootstrap closes the core under it; that is a stop, not a failure.
      if (!stopping) throw err;
    }
  }
}

main().catch((err: unknown) => {
  const known = err instanceof ConfigError || err instanceof ModelsFileError;
  process.stderr.write(`sluice: ${known ? err.message : err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
