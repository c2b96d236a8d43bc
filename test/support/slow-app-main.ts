/**
 * Entry point of a child Sluice process for fault tests: the app from `process.env` (set
 * REDIS_URL, ports 0, SLUICE_RESERVATION_TTL_MS, ...) serving the slow test model. Prints one
 * JSON line `{"edgeUrl": ..., "coreUrl": ...}` on stdout once it listens. It exits when its
 * stdin closes, so a test runner that dies never leaves it behind.
 */
import { startApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config/index.ts";
import { silentLogger } from "../../src/logger.ts";
import { slowModels } from "./slow-model.ts";

const app = await startApp(loadConfig(process.env), { logger: silentLogger, models: slowModels() });
process.stdout.write(`${JSON.stringify({ edgeUrl: app.edgeUrl, coreUrl: app.coreUrl ?? "" })}\n`);

const stop = () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.stdin.on("end", stop);
process.stdin.on("error", stop);
process.stdin.resume();
process.once("SIGTERM", stop);
