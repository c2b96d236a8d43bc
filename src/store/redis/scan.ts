import { Cluster } from "ioredis";
import type { RedisClient } from "./client.ts";

/** Keys a SCAN step asks for: small enough that each step is short for the server. */
const SCAN_COUNT = 500;

/** The servers whose keys a SCAN must walk: every primary of a Cluster, or the one server. */
function scanTargets(redis: RedisClient) {
  return redis instanceof Cluster ? redis.nodes("master") : [redis];
}

/**
 * Walks every key matching `pattern` with SCAN (never KEYS, which would block the server), on
 * every primary of a Cluster, handing each step's keys to `onKeys` before the next step. Shared
 * by the passes that must find keys by name: the email index backfill and the alert outbox sweep.
 */
export async function scanKeys(
  redis: RedisClient,
  pattern: string,
  onKeys: (keys: string[]) => Promise<void>,
): Promise<void> {
  for (const node of scanTargets(redis)) {
    let cursor = "0";
    do {
      const [next, found] = await node.scan(cursor, "MATCH", pattern, "COUNT", SCAN_COUNT);
      cursor = next;
      await onKeys(found);
    } while (cursor !== "0");
  }
}
