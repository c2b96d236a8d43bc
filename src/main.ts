import { randomBytes } from "node:crypto";
import { startApp } from "./app.ts";
import { ConfigError, loadConfig } from "./config/index.ts";
import { bootstrapDevAccount, devBanner } from "./dev-bootstrap.ts";
import { ModelsFileError } from "./engines/models.ts";
import { createLogger } from "./logger.ts";

/** Entry point of `npm start`: one process with the edge and the core. */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  const logger = createLogger(config.SLUICE_LOG);
  const embedded = config.REDIS_URL === undefined && config.CORE_URL === undefined;
  const bootstrap = embedded && config.SLUICE_DEV_BOOTSTRAP === "auto";
  // DESIGN: the dev bootstrap is the one case where Admin runs with a made-up token.
  const adminToken = config.SLUICE_ADMIN_TOKEN ?? (bootstrap ? `dev_${randomBytes(24).toString("base64url")}` : undefined);
  const app = await startApp({ ...config, SLUICE_ADMIN_TOKEN: adminToken }, { logger });
  logger.info("sluice started", { edge: app.edgeUrl, core: app.coreUrl, store: embedded ? "memory" : "redis" });
  process.stdout.write(`Sluice edge on ${app.edgeUrl}/v1, core (gRPC/Connect/gRPC-Web) on ${app.coreUrl ?? config.CORE_URL}\n`);

  if (bootstrap && app.coreUrl && adminToken && (await app.store?.countAccounts()) === 0) {
    const creds = await bootstrapDevAccount(app.coreUrl, adminToken);
    process.stdout.write(devBanner(app.edgeUrl, app.coreUrl, creds, adminToken));
  }

  const stop = (signal: string) => {
    logger.info("stopping", { signal });
    app.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((err: unknown) => {
  const known = err instanceof ConfigError || err instanceof ModelsFileError;
  process.stderr.write(`sluice: ${known ? err.message : err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
