import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServer } from "../../../test/support/redis-server.ts";
import { acceptsSecret } from "../key-secrets.ts";
import type { ApiKeyRecord, Store } from "../store.ts";
import { connectRedis, type RedisClient } from "./client.ts";
import { createRedisStore, type RedisStoreOptions } from "./index.ts";

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const newHash = () => randomBytes(32).toString("hex");

/** The commands a rotation writes with; a probe runs before each is sent. */
const WRITES = new Set(["set", "del", "evalsha", "eval"]);

/** `client`, with `probe` awaited before every write command it is asked to send. */
function probed(client: RedisClient, probe: (command: string) => Promise<void>): RedisClient {
  return new Proxy(client, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof prop !== "string" || !WRITES.has(prop) || typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        await probe(prop);
        return value.apply(target, args);
      };
    },
  });
}

/**
 * What the key index outside the account's slot means for rotation on Redis: another process
 * (a store of its own, no cache) must find a working secret between any two of the rotation's
 * commands, and a process that cached the old secret must drop it when told, not when its
 * cache entry ages out.
 */
describe("Redis store: rotating a key", () => {
  let server: RedisServer;
  const stores: Store[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await server?.close();
  });

  const open = async (options: Partial<RedisStoreOptions> & { prefix: string }) => {
    const store = createRedisStore({
      redis: await connectRedis(server.url),
      serverTime: false,
      commandTimeoutMs: 5_000,
      backfillEmailIndex: false,
      ...options,
    });
    stores.push(store);
    return store;
  };
  const keyOn = async (store: Store): Promise<ApiKeyRecord> => {
    const accountId = randomUUID();
    const key: ApiKeyRecord = {
      id: `key_${randomUUID().replaceAll("-", "")}`,
      accountId,
      prefix: "svc_sk_abcdef",
      hash: newHash(),
      rateLimitRps: 10,
      burst: 10,
      revoked: false,
      createTimeMs: NOW,
    };
    await store.createApiKey(key);
    return key;
  };
  const works = async (store: Store, hash: string) => {
    const key = await store.findApiKeyByHash(hash);
    return key !== undefined && acceptsSecret(key, hash, NOW);
  };

  it("never leaves a moment, between its commands, when neither secret works (grace 0)", async () => {
    const prefix = `rot${randomUUID().slice(0, 6)}`;
    const observer = await open({ prefix, cacheTtlMs: 0 });
    const secrets = { old: "", new: "" };
    const seen: Array<{ command: string; old: boolean; new: boolean }> = [];
    const probe = async (command: string) => {
      if (secrets.new === "") return;
      seen.push({ command, old: await works(observer, secrets.old), new: await works(observer, secrets.new) });
    };
    const rotating = await open({ prefix, redis: probed(await connectRedis(server.url), probe) });
    const key = await keyOn(rotating);
    secrets.old = key.hash;
    for (let i = 0; i < 2; i++) {
      secrets.new = newHash();
      const request = { apiKeyId: key.id, hash: secrets.new, prefix: "svc_sk_rotate", gracePeriodMs: 0, nowMs: NOW };
      expect((await rotating.rotateApiKey(request))?.outcome).toBe("rotated");
      expect(await works(observer, secrets.old)).toBe(false);
      expect(await works(observer, secrets.new)).toBe(true);
      secrets.old = secrets.new;
    }
    // The index entry before the switch (the script: EVALSHA, then EVAL the first time it runs);
    // the second rotation also drops the secret it pushed out.
    const steps = seen.map((s) => (s.command.startsWith("eval") ? "script" : s.command));
    expect(steps.filter((step, i) => step !== steps[i - 1])).toEqual(["set", "script", "set", "script", "del"]);
    expect(seen.filter((s) => !s.old && !s.new)).toEqual([]);
  });

  it("another process drops its cached old secret when told, long before its cache entry would age", async () => {
    const prefix = `rot${randomUUID().slice(0, 6)}`;
    const a = await open({ prefix, subscriber: await connectRedis(server.url) });
    const b = await open({ prefix, subscriber: await connectRedis(server.url), cacheTtlMs: 60_000 });
    const key = await keyOn(a);
    expect(await works(b, key.hash)).toBe(true); // now cached in B for a minute
    const hash = newHash();
    await a.rotateApiKey({ apiKeyId: key.id, hash, prefix: "svc_sk_rotate", gracePeriodMs: 0, nowMs: NOW });
    expect(await works(b, hash)).toBe(true);
    await expect.poll(() => works(b, key.hash), { timeout: 1_000, interval: 10 }).toBe(false);
  });
});
