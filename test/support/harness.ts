import { createClient, type Client } from "@connectrpc/connect";
import { afterAll } from "vitest";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { startApp, type App, type AppOptions } from "../../src/app.ts";
import { loadConfig } from "../../src/config/index.ts";
import { silentLogger } from "../../src/logger.ts";
import { startRedisServer, type RedisServer } from "./redis-server.ts";

/**
 * Which store the end-to-end suites run on: `SLUICE_TEST_STORE=redis` (the `e2e-redis` vitest
 * project) gives every test file one redis-server of its own, shared by its apps.
 */
export const TEST_STORE = process.env.SLUICE_TEST_STORE === "redis" ? "redis" : "memory";
let fileRedis: Promise<RedisServer> | undefined;

/** The REDIS_URL for this test file's apps, or nothing on the memory store or when the test names its own. */
async function storeEnv(env: Record<string, string>): Promise<Record<string, string>> {
  if (TEST_STORE !== "redis" || env.REDIS_URL !== undefined) return {};
  fileRedis ??= startRedisServer();
  return { REDIS_URL: (await fileRedis).url };
}

// Registered when a test file imports the harness, so it runs after the file's own hooks.
afterAll(async () => {
  await (await fileRedis)?.close();
});

/** The admin token every test app uses. */
export const ADMIN_TOKEN = "test-admin-token-0123456789";

/** A running app on free ports, with an Admin client and helpers to make accounts and keys. */
export interface TestApp extends App {
  admin: Client<typeof AdminService>;
  adminHeaders: Record<string, string>;
  /** The Redis this app uses, on the Redis store; tests read its ledger after the app closed. */
  redisUrl: string | undefined;
  /** Creates an onboarded account with `capUsdMicros` and one key; returns both. */
  newAccount(options?: {
    capUsdMicros?: bigint | undefined;
    onboarded?: boolean;
    rps?: number;
    burst?: number;
  }): Promise<{ accountId: string; apiKey: string; apiKeyId: string }>;
}

/** Starts Sluice on port 0 with the given environment overrides and options. */
export async function startTestApp(
  env: Record<string, string> = {},
  options: Partial<AppOptions> = {},
): Promise<TestApp> {
  const stored = await storeEnv(env);
  const config = loadConfig({
    PORT: "0",
    GRPC_PORT: "0",
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    SLUICE_ADMIN_TOKEN: ADMIN_TOKEN,
    SLUICE_LOG: "silent",
    SLUICE_SHUTDOWN_GRACE_MS: "0",
    ...stored,
    ...env,
  });
  const app = await startApp(config, { logger: silentLogger, ...options });
  if (!app.coreUrl) throw new Error("test app has no core");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: app.coreUrl }));
  const adminHeaders = { authorization: `Bearer ${ADMIN_TOKEN}` };
  return {
    ...app,
    redisUrl: env.REDIS_URL ?? stored.REDIS_URL,
    admin,
    adminHeaders,
    async newAccount({ capUsdMicros = 10_000_000n, onboarded = true, rps, burst } = {}) {
      const { account } = await admin.createAccount(
        { onboardingComplete: onboarded, ...(capUsdMicros !== undefined && { spendCapUsdMicros: capUsdMicros }) },
        { headers: adminHeaders },
      );
      if (!account) throw new Error("no account");
      const key = await admin.createApiKey(
        {
          accountId: account.id,
          ...(rps !== undefined && { rateLimitRps: rps }),
          ...(burst !== undefined && { burst }),
        },
        { headers: adminHeaders },
      );
      return { accountId: account.id, apiKey: key.secret, apiKeyId: key.apiKey?.id ?? "" };
    },
  };
}
