import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { redisBackends } from "../../../test/support/redis-backends.ts";
import { account } from "../contract/support.ts";
import type { AccountRecord } from "../store.ts";
import { connectRedis } from "./client.ts";
import { backfillEmailIndex } from "./email-index.ts";
import { createRedisStore } from "./index.ts";
import { createKeys } from "./keys.ts";
import { accountFields } from "./records.ts";

/**
 * Accounts created before the email index existed are indexed once per database, in the
 * background of the store's start, by a SCAN over every node (a Cluster's keys are spread).
 */
const { backends, clients, stores } = redisBackends();

describe.each(backends)("email index backfill: %s", (_name, urlOf) => {
  /** A fresh prefix, a raw client, and old accounts written as before the index: hashes only. */
  async function oldDatabase(count: number) {
    const url = await urlOf();
    const redis = await connectRedis(url);
    clients.push(redis);
    const prefix = `bf${randomUUID().slice(0, 8)}`;
    const keys = createKeys(prefix);
    const old = Array.from({ length: count }, (_, i) => account({ email: `Old${i}@Example.com` }));
    for (const a of [...old, account()]) await redis.hset(keys.account(a.id), accountFields(a));
    const open = async (backfill: boolean) => {
      const store = createRedisStore({ redis: await connectRedis(url), prefix, backfillEmailIndex: backfill });
      stores.push(store);
      return store;
    };
    return { redis, keys, old, open };
  }
  const sorted = (list: AccountRecord[]) => [...list].sort((a, b) => (a.id < b.id ? -1 : 1));

  it("indexes old accounts once, by SCAN, and the marker makes later runs skip", async () => {
    const { redis, keys, old, open } = await oldDatabase(30);
    const store = await open(false);
    const fresh = account({ email: "old0@example.com" });
    await store.createAccount(fresh);
    // A new account whose index entry was lost is found by the pass too.
    const lost = account({ email: "lost@example.com" });
    await store.createAccount(lost);
    await redis.del(keys.accountsByEmail("lost@example.com"));
    expect(await store.findAccountsByEmail("old0@example.com")).toEqual([fresh]);
    expect(await store.findAccountsByEmail("old7@example.com")).toEqual([]);
    expect(await store.findAccountsByEmail("lost@example.com")).toEqual([]);

    expect(await backfillEmailIndex(redis, keys)).toEqual({ outcome: "done", indexed: 32 });
    expect(sorted(await store.findAccountsByEmail("OLD0@example.com"))).toEqual(
      sorted([old[0] as AccountRecord, fresh]),
    );
    for (const a of old.slice(1)) expect(await store.findAccountsByEmail(a.email ?? "")).toEqual([a]);
    expect(await store.findAccountsByEmail("lost@example.com")).toEqual([lost]);
    expect(await redis.exists(keys.emailIndexBackfilled)).toBe(1);

    await redis.del(keys.accountsByEmail("lost@example.com"));
    expect(await backfillEmailIndex(redis, keys)).toEqual({ outcome: "skipped" });
    expect(await store.findAccountsByEmail("lost@example.com")).toEqual([]);
  });

  it("runs from the store's start, in the background, once per database", async () => {
    const { old, open } = await oldDatabase(3);
    const first = await open(true);
    expect(await first.emailIndexBackfill).toEqual({ outcome: "done", indexed: 3 });
    expect(await first.findAccountsByEmail("old2@example.com")).toEqual([old[2]]);
    const second = await open(true);
    expect(await second.emailIndexBackfill).toEqual({ outcome: "skipped" });
  });

  it("reports a failed pass and leaves no marker, so the next start runs it again", async () => {
    const { redis, keys } = await oldDatabase(1);
    const broken = await connectRedis(await urlOf());
    broken.disconnect();
    expect((await backfillEmailIndex(broken, keys)).outcome).toBe("failed");
    expect(await redis.exists(keys.emailIndexBackfilled)).toBe(0);
    expect(await backfillEmailIndex(redis, keys)).toEqual({ outcome: "done", indexed: 1 });
  });
});
