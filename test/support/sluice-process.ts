import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";

/** The repository root, so `src/main.ts` resolves whatever directory vitest runs from. */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const STARTED = /Sluice edge on (http:\/\/\S+)\/v1, core \(gRPC\/Connect\/gRPC-Web\) on (http:\/\/\S+)/;

/**
 * One real `node src/main.ts` child process: the multi-process suites need separate
 * processes (separate caches, event loops and Redis connections), not apps in one process.
 */
export interface SluiceProcess {
  edgeUrl: string;
  coreUrl: string;
  child: ChildProcess;
  /** What the process wrote to stderr so far (logs at the chosen level). */
  stderr(): string;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Spawns `node src/main.ts` with `env` over the current environment; resolves once it has started. */
export async function spawnSluice(env: Record<string, string>, timeoutMs = 20_000): Promise<SluiceProcess> {
  const child = spawn(process.execPath, ["src/main.ts"], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const stop = async (graceMs = 5_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  };
  const urls = await new Promise<{ edgeUrl: string; coreUrl: string }>((resolve, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`sluice did not start within ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    );
    const onData = (d: Buffer) => {
      stdout += d.toString();
      const m = STARTED.exec(stdout);
      if (m?.[1] && m[2]) {
        cleanup();
        resolve({ edgeUrl: m[1], coreUrl: m[2] });
      }
    };
    const onExit = (code: number | null) => fail(new Error(`sluice exited (${code}) before starting: ${stderr}`));
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
    };
    const fail = (err: Error) => {
      cleanup();
      void stop(0);
      reject(err);
    };
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
  });
  // Keep draining stdout so a chatty child never blocks on a full pipe.
  child.stdout?.resume();
  return { ...urls, child, stderr: () => stderr, stop };
}

/** An Admin client on one process's core, with the bearer header every call needs. */
export interface AdminHandle {
  client: Client<typeof AdminService>;
  headers: Record<string, string>;
  /** Creates an onboarded account with `capUsdMicros` and one key with the given limits. */
  newAccount(capUsdMicros: bigint, rps: number, burst: number): Promise<{ accountId: string; apiKey: string }>;
  /** Spent and reserved micros of the current period, and the cap. */
  balance(accountId: string): Promise<{ spent: bigint; reserved: bigint; cap: bigint | undefined }>;
  /** Every usage record of an account, following page tokens. */
  usageRecords(
    accountId: string,
  ): Promise<Array<{ id: string; promptTokens: bigint; completionTokens: bigint; costUsdMicros: bigint }>>;
}

/** Builds an `AdminHandle` over gRPC to `coreUrl`. */
export function adminOf(coreUrl: string, token: string): AdminHandle {
  const client = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl }));
  const headers = { authorization: `Bearer ${token}` };
  return {
    client,
    headers,
    async newAccount(capUsdMicros, rps, burst) {
      const { account } = await client.createAccount(
        { onboardingComplete: true, spendCapUsdMicros: capUsdMicros },
        { headers },
      );
      if (!account) throw new Error("CreateAccount returned no account");
      const key = await client.createApiKey({ accountId: account.id, rateLimitRps: rps, burst }, { headers });
      return { accountId: account.id, apiKey: key.secret };
    },
    async balance(accountId) {
      const { account } = await client.getAccount({ accountId }, { headers });
      if (!account) throw new Error("GetAccount returned no account");
      return { spent: account.spentUsdMicros, reserved: account.reservedUsdMicros, cap: account.spendCapUsdMicros };
    },
    async usageRecords(accountId) {
      const out = [];
      let pageToken = "";
      do {
        const page = await client.listUsageRecords({ accountId, pageSize: 1000, pageToken }, { headers });
        out.push(...page.usageRecords);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      return out;
    },
  };
}
