import { Cluster, Redis, type RedisOptions } from "ioredis";
import { sluiceError } from "../../errors/catalogue.ts";
import { markNotSent } from "../store.ts";

/** A single server, a Sentinel-managed primary, or a Cluster: the store works with each. */
export type RedisClient = Redis | Cluster;

/** The default per-command timeout (`SLUICE_STORE_TIMEOUT_MS`). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 500;

/**
 * Client options that make a Redis outage fail fast instead of hanging calls: no offline
 * queue (a command while disconnected fails at once), a per-command timeout against a server
 * that stalls rather than dies (so a caller gets its 503 within a second; a timed-out write
 * may still land later, which is why the call lifecycle resolves such writes by completion
 * id), and endless reconnection in the background so the service recovers without a restart.
 */
function failFast(commandTimeoutMs: number): RedisOptions {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // The deadline callers wait for is `guarded`'s; this one only frees the promises of
    // commands a stalled server never answers.
    commandTimeout: Math.max(5000, 5 * commandTimeoutMs),
    connectTimeout: 1000,
    retryStrategy: (attempt: number) => Math.min(50 * attempt, 500),
    enableReadyCheck: true,
    // Commands issued in one turn of the event loop (the rate-limit charges and settles of concurrent
    // calls) go out in one socket write: one syscall per turn instead of one per command,
    // which showed in profiles of the Redis path. Each command keeps its own reply, error and
    // timeout, and commands still reach the server in the order they were issued.
    enableAutoPipelining: true,
  };
}

/** The delay a caller is asked to wait while Redis is unreachable. */
export const REDIS_RETRY_MS = 1000;

const hosts = (list: string) =>
  list
    .split(",")
    .filter(Boolean)
    .map((hostPort) => {
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
export function createRedisClient(url: string, commandTimeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): RedisClient {
  const FAIL_FAST = failFast(commandTimeoutMs);
  const match = /^(redis-sentinel|redis-cluster):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/]+)(?:\/(.*))?$/.exec(url);
  if (!match) return new Redis(url, { ...FAIL_FAST, lazyConnect: true });
  const [, scheme, user, password, nodes = "", name] = match;
  const auth = {
    ...(user && { username: decodeURIComponent(user) }),
    ...(password && { password: decodeURIComponent(password) }),
  };
  if (scheme === "redis-sentinel") {
    if (!name) throw new Error("REDIS_URL: a redis-sentinel:// URL names the primary after the hosts, as /<name>");
    return new Redis({ ...FAIL_FAST, ...auth, lazyConnect: true, sentinels: hosts(nodes), name });
  }
  return new Cluster(hosts(nodes), {
    enableOfflineQueue: false,
    lazyConnect: true,
    redisOptions: { ...FAIL_FAST, ...auth },
  });
}

/** How `connectRedis` connects: how long to wait for the server, and each command's timeout. */
export interface ConnectOptions {
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
}

/** Connects to `url` and waits until the server is ready, or fails with a clear message. */
export async function connectRedis(url: string, options: ConnectOptions = {}): Promise<RedisClient> {
  const timeoutMs = options.connectTimeoutMs ?? 5000;
  const redis = createRedisClient(url, options.commandTimeoutMs);
  redis.on("error", () => {
    // Connection errors surface per command (as 503s) and through /readyz; reconnection is automatic.
  });
  const timer = setTimeout(() => redis.disconnect(), timeoutMs);
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new Error(
      `REDIS_URL: cannot connect within ${timeoutMs} ms: ${err instanceof Error ? err.message : String(err)}`,
    );
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

/**
 * Rejects when `promise` has not settled `ms` after the call. The check waits one more turn of
 * the event loop after the timer: a process whose loop was blocked (a busy moment) reads the
 * replies already in its sockets before it declares them late, so only a store that really
 * stalled times out.
 */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(new Error(`Command timed out after ${ms} ms`));
        }),
      ms,
    );
    promise.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/**
 * ioredis refuses a command at once, unsent, while a single-server client has no connection
 * (no offline queue). Only that message is taken as "certainly not sent": a Cluster client
 * retries commands whose connection closed, and its "isn't ready" refusal may come after a
 * first attempt that did reach a node.
 */
const UNSENT = /^Stream isn't writeable and enableOfflineQueue options is false$/;

/**
 * Runs a Redis operation within `timeoutMs`, turning any Redis failure into a structured 503.
 * A command that was never sent is marked so (`wasNotSent`): it certainly did not happen.
 */
export async function guarded<T>(operation: () => Promise<T>, timeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): Promise<T> {
  try {
    return await within(operation(), timeoutMs);
  } catch (err) {
    const error = sluiceError("service_unavailable", { retryAfterMs: REDIS_RETRY_MS, cause: err });
    if (err instanceof Error && UNSENT.test(err.message)) markNotSent(error);
    throw error;
  }
}
