import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, pingRedis, redisServerArgs } from "../../test/support/redis-server.ts";
import { managedChild, type ManagedChild } from "./child.ts";
import { SluiceLogs } from "./sluice-logs.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const STARTED = /Sluice edge on (http:\/\/\S+)\/v1, core \(gRPC\/Connect\/gRPC-Web\) on (http:\/\/\S+)/;

/** Holds not renewed within this expire; small so the holds of killed calls clear within the run. */
export const RESERVATION_TTL_MS = 3_000;
/** The Admin bearer of every Sluice process of the run. */
export const ADMIN_TOKEN = "soak-admin-token-0123456789abcdef";
/** The two models served: the built-in extractive one and one in front of both fake upstreams. */
export const MODELS = { extract: "service-extract", upstream: "soak-upstream" } as const;

/** One Sluice process on fixed ports, so a restarted process is reached at the same URLs. */
export interface SluiceNode {
  child: ManagedChild;
  edgeUrl: string;
  coreUrl: string;
}
/** One fake upstream process on a fixed port, so a restart comes back where Sluice expects it. */
export interface UpstreamNode {
  child: ManagedChild;
  url: string;
}

/**
 * Everything the soak runs and hurts: one redis-server (append-only, fsync on every write,
 * so a SIGKILL keeps the ledger), two fake upstreams and four Sluice processes.
 */
export interface Cluster {
  dir: string;
  redisUrl: string;
  redis: ManagedChild;
  upstreams: UpstreamNode[];
  sluices: SluiceNode[];
  /** Warn and error lines of every Sluice process, counted. */
  logs: SluiceLogs;
  /** Stops every child (SIGCONT first, so a frozen one can die) and removes the temp dir. */
  close(): Promise<void>;
}

/** Temp dirs made and not yet removed, for the last-resort cleanup on exit. */
const tempDirs = new Set<string>();

/** Removes every temp dir of the run, synchronously (from `process.on("exit")`, even mid-start). */
export function removeTempDirsSync(): void {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** The models file: both prices non-zero, short upstream timeouts so stalls end within seconds. */
function modelsFile(upstreamUrls: string[]): object {
  return {
    models: [
      {
        name: MODELS.extract,
        engine: "extractive",
        inputUsdMicrosPerMillion: 1_000_000,
        outputUsdMicrosPerMillion: 2_000_000,
      },
      {
        name: MODELS.upstream,
        engine: "openai",
        baseUrl: upstreamUrls,
        upstreamModel: "meta-llama/Llama-3.1-8B-Instruct",
        inputUsdMicrosPerMillion: 500_000,
        outputUsdMicrosPerMillion: 1_500_000,
        connectTimeoutMs: 1_000,
        firstByteTimeoutMs: 3_000,
        idleTimeoutMs: 2_000,
        breakerFailures: 5,
        breakerOpenMs: 2_000,
      },
    ],
  };
}

/** Every child started so far, for a cleanup after a failed start. */
async function stopAll(children: ManagedChild[]): Promise<void> {
  await Promise.all(children.map((c) => c.stop(2_000).catch(() => undefined)));
}

/**
 * Starts the whole cluster on free loopback ports in a fresh temp dir. On any failure it stops
 * what it had started and removes the dir before rethrowing.
 */
export async function startCluster(seed: number, sluiceCount = 4): Promise<Cluster> {
  const probe = spawnSync("redis-server", ["--version"]);
  if (probe.error || probe.status !== 0)
    throw new Error("redis-server is not installed or not on PATH (apt-get install redis-server)");
  const dir = mkdtempSync(join(tmpdir(), "sluice-soak-"));
  tempDirs.add(dir);
  const started: ManagedChild[] = [];
  try {
    const redisPort = await freePort();
    const redisDir = join(dir, "redis");
    mkdirSync(redisDir);
    const redis = managedChild({
      name: "redis",
      command: "redis-server",
      args: redisServerArgs({ port: redisPort, dir: redisDir, appendonly: true }),
      readyProbe: () => pingRedis(redisPort),
    });
    started.push(redis);
    await redis.start();
    const redisUrl = `redis://127.0.0.1:${redisPort}`;

    const upstreams: UpstreamNode[] = [];
    for (const [i, delay] of [4, 12].entries()) {
      const port = await freePort();
      const child = managedChild({
        name: `upstream-${i}`,
        command: process.execPath,
        args: [join(ROOT, "scripts/soak/upstream-main.ts")],
        cwd: ROOT,
        env: { PORT: String(port), CHUNK_DELAY_MS: String(delay), SOAK_SEED: String((seed + 7919 * (i + 1)) >>> 0) },
        readyLine: /fake upstream on (http:\/\/\S+)/,
      });
      started.push(child);
      upstreams.push({ child, url: `http://127.0.0.1:${port}/v1` });
    }
    await Promise.all(upstreams.map((u) => u.child.start()));

    const modelsPath = join(dir, "models.json");
    writeFileSync(modelsPath, JSON.stringify(modelsFile(upstreams.map((u) => u.url)), null, 2));
    const sluices: SluiceNode[] = [];
    const logs = new SluiceLogs();
    for (let i = 0; i < sluiceCount; i++) {
      const [port, grpcPort] = [await freePort(), await freePort()];
      const child = managedChild({
        name: `sluice-${i}`,
        command: process.execPath,
        args: ["src/main.ts"],
        cwd: ROOT,
        readyLine: STARTED,
        timeoutMs: 60_000,
        onStderr: logs.feeder(),
        env: {
          PORT: String(port),
          GRPC_PORT: String(grpcPort),
          METRICS_PORT: "0",
          HOST: "127.0.0.1",
          REDIS_URL: redisUrl,
          SLUICE_ADMIN_TOKEN: ADMIN_TOKEN,
          SLUICE_MODELS: modelsPath,
          SLUICE_RESERVATION_TTL_MS: String(RESERVATION_TTL_MS),
          SLUICE_LOG: "warn",
          SLUICE_DEV_BOOTSTRAP: "off",
          SLUICE_SHUTDOWN_GRACE_MS: "1000",
          SLUICE_SSE_WRITE_TIMEOUT_MS: "5000",
        },
      });
      started.push(child);
      sluices.push({ child, edgeUrl: `http://127.0.0.1:${port}`, coreUrl: `http://127.0.0.1:${grpcPort}` });
    }
    // Two at a time: four cold Node starts at once on a two-core machine take longer than in turn.
    for (let i = 0; i < sluices.length; i += 2) await Promise.all(sluices.slice(i, i + 2).map((s) => s.child.start()));

    return {
      dir,
      redisUrl,
      redis,
      upstreams,
      sluices,
      logs,
      async close() {
        await stopAll([...sluices.map((s) => s.child), ...upstreams.map((u) => u.child), redis]);
        rmSync(dir, { recursive: true, force: true });
        tempDirs.delete(dir);
      },
    };
  } catch (err) {
    await stopAll(started);
    rmSync(dir, { recursive: true, force: true });
    tempDirs.delete(dir);
    throw err;
  }
}
