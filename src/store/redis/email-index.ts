import { normalizeEmail } from "../email.ts";
import type { RedisClient } from "./client.ts";
import type { createKeys } from "./keys.ts";
import { scanKeys } from "./scan.ts";

/** How a run of `backfillEmailIndex` ended. */
export type EmailBackfill =
  /** The pass ran to its end and set the marker; `indexed` accounts had an email. */
  | { outcome: "done"; indexed: number }
  /** The marker was already set: an earlier pass (of any process) finished. */
  | { outcome: "skipped" }
  /** A command failed (Redis unreachable, the store closed): the marker is not set, so the next start runs it again. */
  | { outcome: "failed"; error: unknown };

/**
 * Indexes the emails of accounts created before `findAccountsByEmail` existed, once per Redis
 * database: it walks the account hashes with SCAN (never KEYS, which would block the server),
 * adds each account with an email to its set, and then sets a marker key so that later starts
 * skip it. The index only grows and `createAccount` writes it too, so a pass that races account
 * creation, or runs twice in two processes starting at once, is harmless; a pass cut short leaves
 * no marker and is run again in full by the next start. It never throws.
 */
export async function backfillEmailIndex(
  redis: RedisClient,
  keys: ReturnType<typeof createKeys>,
): Promise<EmailBackfill> {
  try {
    if ((await redis.exists(keys.emailIndexBackfilled)) === 1) return { outcome: "skipped" };
    let indexed = 0;
    await scanKeys(redis, keys.accountPattern, async (found) => {
      const done = await Promise.all(
        found.map(async (key) => {
          const id = keys.accountIdOf(key);
          const email = id === undefined ? null : await redis.hget(key, "email");
          if (id === undefined || email === null) return 0;
          await redis.sadd(keys.accountsByEmail(normalizeEmail(email)), id);
          return 1;
        }),
      );
      indexed += done.reduce<number>((sum, n) => sum + n, 0);
    });
    await redis.set(keys.emailIndexBackfilled, new Date().toISOString());
    return { outcome: "done", indexed };
  } catch (error) {
    return { outcome: "failed", error };
  }
}
