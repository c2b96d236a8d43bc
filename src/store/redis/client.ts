import { Cluster, Redis, type RedisOptions } from "ioredis";
import { sluiceError } from "../../errors/catalogue.ts";

/** A single server, a Sentinel-managed primary, or a Cluster: the store works with each. */
export type RedisClient = Redis | Cluster;

/**
 * Client options that make a Redis outage fail fast instead of hanging calls: no offline
 * queue (a command while disconnected fails at once), a per-command timeout as the last guard
 * against a hung server (long enough not to fire on a busy event loop: a timed-out write may
 * still have happened), and endless
 * reconnection in the background so the service recovers without a restart.
 */
export const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: 2000,
  connectTimeout: 1000,
  retryStrategy: (attempt: number) => Math.min(50 * attempt, 500),
  enableReadyCheck: true,
};

/** The delay a caller is asked to wait while Redis is unreachable. */
export const REDIS_RETRY_MS = 1000;

const hosts = (list: string) => list.split(",").filter(Boolean).map((hostPort) => {
  const [host = "", port = ""] = hostPort.split(":");
  return { host, port: Number(port) };
});

/**
 * Builds a client for `REDIS_URL`:
 * - `redis://[user:pass@]host:port[/db]` or `rediss://...` (TLS): one server;
 * - `redis-sentinel://[user:pass@]s1:26379,s2:26379/<primary-name>`: the primary that the
 *   Sentinels name, followed across failovers;
 * - `redis-cluster://[user:pass@]n1:6379,n2:6379`: a Cluster, seeded from those nodes.
 */
export function createRedisClient(url: string): RedisClient {
  const match = /^(redis-sentinel|redis-cluster):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/]+)(?:\/(.*))?$/.exec(url);
  if (!match) return new Redis(url, { ...FAIL_FAST, lazyConnect: true });
  const [, scheme, user, password, nodes = "", name] = match;
  const auth = { ...(user && { username: decodeURIComponent(user) }), ...(password && { password: decodeURIComponent(password) }) };
  if (scheme === "redis-sentinel") {
    if (!name) throw new Error("REDIS_URL: a redis-sentinel:// URL names the primary after the hosts, as /<name>");
    return new Redis({ ...FAIL_FAST, ...auth, lazyConnect: true, sentinels: hosts(nodes), name });
  }
  return new Cluster(hosts(nodes), { enableOfflineQueue: false, lazyConnect: true, redisOptions: { ...FAIL_FAST, ...auth } });
}

/** Connects to `url` and waits until the server is ready, or fails with a clear message. */
export async function connectRedis(url: string, timeoutMs = 5000): Promise<RedisClient> {
  const redis = createRedisClient(url);
  redis.on("error", () => {
    // Connection errors surface per command (as 503s) and through /readyz; reconnection is automatic.
  });
  const timer = setTimeout(() => redis.disconnect(), timeoutMs);
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new Error(`REDIS_URL: cannot connect within ${timeoutMs} ms: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    clearTimeout(timer);
  }
  return redis;
}

/**
 * Calls `onCommand` for every command the client sends (a script counts once), so the
 * round trips a call costs can be watched in `/metrics` and measured by the benchmark.
 */
export function countCommands(client: RedisClient, onCommand: () => void): RedisClient {
  const send = client.sendCommand.bind(client) as (...args: unknown[]) => unknown;
  Object.defineProperty(client, "sendCommand", {
    value: (...args: unknown[]) => {
      onCommand();
      return send(...args);
    },
  });
  return client;
}

/** Runs a Redis operation, turning any Redis failure into a structured 503. */
export async function guarded<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw sluiceError("service_unavailable", { retryAfterMs: REDIS_RETRY_MS, cause: err });
  }
}
