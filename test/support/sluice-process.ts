import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { AdminAccess } from "./ledger.ts";

/** The repository root, so `src/main.ts` resolves whatever directory vitest runs from. */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SLOW_APP = fileURLToPath(new URL("./slow-app-main.ts", import.meta.url));
const STARTED = /Sluice edge on (http:\/\/\S+)\/v1, core \(gRPC\/Connect\/gRPC-Web\) on (http:\/\/\S+)/;

type Urls = { edgeUrl: string; coreUrl: string };

/**
 * Sluice in a child Node process: the multi-process and fault suites need separate processes
 * (separate caches, event loops and Redis connections, and one they can crash), not apps in one
 * process.
 */
export interface SluiceProcess extends Urls {
  child: ChildProcess;
  /** What the process wrote to stderr so far (logs at the chosen level). */
  stderr(): string;
  /** SIGKILLs the process (a crash: no cleanup of any kind) and waits for it to exit. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`; nothing when it has exited already. */
  stop(graceMs?: number): Promise<void>;
}

/** How to start one kind of child and tell, from its stdout so far, that it listens. */
interface Launch {
  /** Names the child in errors. */
  what: string;
  args: string[];
  stdin: "pipe" | "ignore";
  /** The URLs once the start line is in `stdout`; throws on a malformed one. */
  started(stdout: string): Urls | undefined;
}

async function launch(spec: Launch, env: Record<string, string>, timeoutMs: number): Promise<SluiceProcess> {
  const child = spawn(process.execPath, spec.args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: [spec.stdin, "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // A child that never spawned (no pid) has nothing to wait for.
  const running = () => child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  const kill = async () => {
    if (!running()) return;
    child.kill("SIGKILL");
    await gone;
  };
  const stop = async (graceMs = 5_000) => {
    if (!running()) return;
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.kill("SIGTERM");
    await gone;
    clearTimeout(timer);
  };

  try {
    const urls = await new Promise<Urls>((resolve, reject) => {
      let stdout = "";
      const timer = setTimeout(
        () => fail(new Error(`${spec.what} did not start within ${timeoutMs} ms; stderr:\n${stderr}`)),
        timeoutMs,
      );
      const onData = (d: Buffer) => {
        stdout += d.toString();
        try {
          const found = spec.started(stdout);
          if (!found) return;
          cleanup();
          resolve(found);
        } catch (err) {
          fail(err instanceof Error ? err : new Error(String(err)));
        }
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
        fail(new Error(`${spec.what} exited (${code ?? signal}) before starting; stderr:\n${stderr}`));
      const cleanup = () => {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        child.off("exit", onExit);
        child.off("error", fail);
      };
      const fail = (err: Error) => {
        cleanup();
        reject(err);
      };
      child.stdout?.on("data", onData);
      child.once("exit", onExit);
      child.once("error", fail);
    });
    // Keep draining stdout so a chatty child never blocks on a full pipe.
    child.stdout?.resume();
    return { ...urls, child, stderr: () => stderr, kill, stop };
  } catch (err) {
    await kill();
    throw err;
  }
}

/** Spawns `node src/main.ts` with `env` over the current environment; resolves once it has started. */
export function spawnSluice(env: Record<string, string>, timeoutMs = 20_000): Promise<SluiceProcess> {
  return launch(
    {
      what: "sluice",
      args: ["src/main.ts"],
      stdin: "ignore",
      started(stdout) {
        const m = STARTED.exec(stdout);
        return m?.[1] && m[2] ? { edgeUrl: m[1], coreUrl: m[2] } : undefined;
      },
    },
    env,
    timeoutMs,
  );
}

/**
 * Starts `count` Sluice processes on free ports, sharing the Redis at `redisUrl` and one admin
 * token (no dev bootstrap, `warn` logs), with `env` over that: all or none. If one fails to
 * start, those that did are stopped and its error is thrown.
 */
export async function spawnFleet(options: {
  count: number;
  redisUrl: string;
  adminToken: string;
  env?: Record<string, string>;
}): Promise<SluiceProcess[]> {
  const env = {
    PORT: "0",
    GRPC_PORT: "0",
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    REDIS_URL: options.redisUrl,
    SLUICE_ADMIN_TOKEN: options.adminToken,
    SLUICE_LOG: "warn",
    SLUICE_DEV_BOOTSTRAP: "off",
    ...options.env,
  };
  const started = await Promise.allSettled(Array.from({ length: options.count }, () => spawnSluice(env)));
  const procs = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await Promise.all(procs.map((p) => p.stop()));
    throw failed.reason;
  }
  return procs;
}

/**
 * Spawns the app of `slow-app-main.ts` (the slow test model, configured by `env` over the
 * current environment), for tests that crash a process mid-call. Its stdin is a pipe: it
 * exits when that closes, so a test runner that dies never leaves it behind.
 */
export function spawnSlowSluice(env: Record<string, string>, timeoutMs = 20_000): Promise<SluiceProcess> {
  return launch(
    {
      what: "slow app",
      args: [SLOW_APP],
      stdin: "pipe",
      started(stdout) {
        const line = stdout
          .split("\n")
          .slice(0, -1)
          .find((l) => l.startsWith("{"));
        if (line === undefined) return undefined;
        const parsed = JSON.parse(line) as { edgeUrl?: unknown; coreUrl?: unknown };
        if (typeof parsed.edgeUrl !== "string" || typeof parsed.coreUrl !== "string")
          throw new Error(`bad start line: ${line}`);
        return { edgeUrl: parsed.edgeUrl, coreUrl: parsed.coreUrl };
      },
    },
    env,
    timeoutMs,
  );
}

/** An Admin client on one process's core, for the ledger readers, and a way to make a paying caller. */
export interface AdminHandle extends AdminAccess {
  /** Creates an onboarded account with `capUsdMicros` and one key with the given limits. */
  newAccount(capUsdMicros: bigint, rps: number, burst: number): Promise<{ accountId: string; apiKey: string }>;
}

/** Builds an `AdminHandle` over gRPC to `coreUrl`, so a suite of child processes can reach any one's core. */
export function adminOf(coreUrl: string, token: string): AdminHandle {
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl }));
  const adminHeaders = { authorization: `Bearer ${token}` };
  return {
    admin,
    adminHeaders,
    async newAccount(capUsdMicros, rps, burst) {
      const { account } = await admin.createAccount(
        { onboardingComplete: true, spendCapUsdMicros: capUsdMicros },
        { headers: adminHeaders },
      );
      if (!account) throw new Error("CreateAccount returned no account");
      const key = await admin.createApiKey(
        { accountId: account.id, rateLimitRps: rps, burst },
        { headers: adminHeaders },
      );
      return { accountId: account.id, apiKey: key.secret };
    },
  };
}
