import { Redis, type RedisOptions } from "ioredis";
import { sluiceError } from "../../errors/catalogue.ts";

/**
 * Client options that make a Redis outage fail fast instead of hanging calls: no offline
 * queue (a command while disconnected fails at once), a per-command timeout, and endless
 * reconnection in the background so the service recovers without a restart.
 */
export const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: 800,
  connectTimeout: 1000,
  retryStrategy: (attempt: number) => Math.min(50 * attempt, 500),
  enableReadyCheck: true,
};

/** The delay a caller is asked to wait while Redis is unreachable. */
export const REDIS_RETRY_MS = 1000;

/** Connects to `url` and waits until the server is ready, or fails with a clear message. */
export async function connectRedis(url: string, timeoutMs = 5000): Promise<Redis> {
  const redis = new Redis(url, { ...FAIL_FAST, lazyConnect: true });
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

/** Runs a Redis operation, turning any Redis failure into a structured 503. */
export async function guarded<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw sluiceError("service_unavailable", { retryAfterMs: REDIS_RETRY_MS, cause: err });
  }
}
