import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { startRedisCluster, type RedisCluster } from "../../test/support/redis-cluster.ts";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.ts";
import { createMemoryStore } from "./memory/index.ts";
import { connectRedis } from "./redis/client.ts";
import { createRedisStore } from "./redis/index.ts";
import { InvalidPageTokenError } from "./page-token.ts";
import type { AccountRecord, ApiKeyRecord, ReserveRequest, Store, UsageRecordRow } from "./store.ts";

/**
 * The one contract every Store backend passes. Add a backend by appending a factory that
 * returns a fresh, empty store (it may be async, e.g. a Redis store on a spawned server).
 */
let redisServer: Promise<RedisServer> | undefined;
const opened: Store[] = [];

/** A Redis store on this file's own redis-server, with a fresh key prefix so it starts empty. */
async function redisStore(): Promise<Store> {
  redisServer ??= startRedisServer();
  const { url } = await redisServer;
  const store = createRedisStore({
    redis: await connectRedis(url),
    subscriber: await connectRedis(url),
    prefix: `t${randomUUID().slice(0, 8)}`,
    serverTime: false,
  });
  opened.push(store);
  return store;
}

let redisCluster: Promise<RedisCluster> | undefined;

/** The same on a three-primary Cluster: any script touching keys of two slots would fail here. */
async function redisClusterStore(): Promise<Store> {
  redisCluster ??= startRedisCluster();
  const { url } = await redisCluster;
  const store = createRedisStore({
    redis: await connectRedis(url),
    subscriber: await connectRedis(url),
    prefix: `t${randomUUID().slice(0, 8)}`,
    serverTime: false,
  });
  opened.push(store);
  return store;
}

afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await (await redisServer)?.close();
  await (await redisCluster)?.close();
});

const backends: [string, () => Store | Promise<Store>][] = [
  ["memory", () => createMemoryStore()],
  ["redis", redisStore],
  ["redis-cluster", redisClusterStore],
];

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const PERIOD = "2026-11";
const TTL = 30_000;

function account(overrides: Partial<AccountRecord> = {}): AccountRecord {
  return {
    id: randomUUID(),
    onboardingComplete: true,
    paymentStatus: "ok",
    subscriptionStatus: "active",
    createTimeMs: NOW,
    ...overrides,
  };
}

function apiKey(accountId: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const id = `key_${randomUUID().replaceAll("-", "")}`;
  return {
    id,
    accountId,
    prefix: "svc_sk_abcdef",
    hash: `${id}-hash`,
    rateLimitRps: 10,
    burst: 10,
    revoked: false,
    createTimeMs: NOW,
    ...overrides,
  };
}

/** A key as the rate limiter sees it. */
function limited(id: string, rateLimitRps: number, burst: number) {
  return { id, accountId: `acct-of-${id}`, rateLimitRps, burst };
}

function record(accountId: string, id: string, createTimeMs = NOW): UsageRecordRow {
  return {
    id,
    accountId,
    apiKeyId: "key_1",
    model: "service-extract",
    promptTokens: 7,
    completionTokens: 3,
    costUsdMicros: 13,
    createTimeMs,
  };
}

describe.each(backends)("Store contract: %s", (_name, makeStore) => {
  /** A fresh store holding one account with the given cap. */
  async function withAccount(capUsdMicros: number | null = 1_000) {
    const store = await makeStore();
    const acc = account(capUsdMicros === null ? {} : { spendCapUsdMicros: capUsdMicros });
    await store.createAccount(acc);
    const reserve = (reservationId: string, minimum: number, maximum: number, extra: Partial<ReserveRequest> = {}) =>
      store.reserve({
        accountId: acc.id,
        period: PERIOD,
        reservationId,
        minimum,
        maximum,
        ttlMs: TTL,
        nowMs: NOW,
        ...extra,
      });
    const balance = (nowMs = NOW, period = PERIOD) => store.balance(acc.id, period, nowMs);
    const settle = (reservationId: string, chargeUsdMicros: number, withRecord = true) =>
      store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId,
        chargeUsdMicros,
        ...(withRecord && { record: { ...record(acc.id, reservationId), costUsdMicros: chargeUsdMicros } }),
      });
    return { store, acc, reserve, balance, settle };
  }

  describe("accounts", () => {
    it("creates, reads, counts and returns copies", async () => {
      const store = await makeStore();
      expect(await store.countAccounts()).toBe(0);
      const acc = account({ email: "a@example.com", spendCapUsdMicros: 5_000_000 });
      await store.createAccount(acc);
      await store.createAccount(account());
      expect(await store.countAccounts()).toBe(2);
      const got = await store.getAccount(acc.id);
      expect(got).toEqual(acc);
      if (got) got.paymentStatus = "failed";
      expect((await store.getAccount(acc.id))?.paymentStatus).toBe("ok");
      expect(await store.getAccount(randomUUID())).toBeUndefined();
    });

    it("keeps an account without a cap capless", async () => {
      const { store, acc } = await withAccount(null);
      expect((await store.getAccount(acc.id))?.spendCapUsdMicros).toBeUndefined();
    });

    it("updates only the fields a patch sets", async () => {
      const { store, acc } = await withAccount(1_000);
      const updated = await store.updateAccount(acc.id, { paymentStatus: "failed" });
      expect(updated).toEqual({ ...acc, paymentStatus: "failed" });
      const again = await store.updateAccount(acc.id, {
        spendCapUsdMicros: 7,
        subscriptionStatus: "canceled",
        onboardingComplete: false,
      });
      expect(again).toEqual({
        ...acc,
        paymentStatus: "failed",
        spendCapUsdMicros: 7,
        subscriptionStatus: "canceled",
        onboardingComplete: false,
      });
      expect(await store.updateAccount(acc.id, { spendCapUsdMicros: undefined })).toEqual(again);
      expect(await store.getAccount(acc.id)).toEqual(again);
      expect(await store.updateAccount(randomUUID(), { paymentStatus: "ok" })).toBeUndefined();
    });
  });

  describe("api keys", () => {
    it("creates, finds by id and by hash, lists per account and revokes", async () => {
      const { store, acc } = await withAccount();
      const other = account();
      await store.createAccount(other);
      const k1 = apiKey(acc.id);
      const k2 = apiKey(acc.id, { rateLimitRps: 2.5, burst: 3 });
      const k3 = apiKey(other.id);
      for (const k of [k1, k2, k3]) await store.createApiKey(k);

      expect(await store.getApiKey(k2.id)).toEqual(k2);
      expect(await store.findApiKeyByHash(k1.hash)).toEqual(k1);
      expect(await store.findApiKeyByHash("nope")).toBeUndefined();
      expect(await store.getApiKey("key_missing")).toBeUndefined();
      const listed = await store.listApiKeys(acc.id);
      expect(listed.map((k) => k.id).sort()).toEqual([k1.id, k2.id].sort());
      expect(await store.listApiKeys(randomUUID())).toEqual([]);

      expect(await store.revokeApiKey(k1.id)).toEqual({ ...k1, revoked: true });
      expect((await store.findApiKeyByHash(k1.hash))?.revoked).toBe(true);
      expect((await store.getApiKey(k1.id))?.revoked).toBe(true);
      expect((await store.getApiKey(k2.id))?.revoked).toBe(false);
      expect(await store.revokeApiKey("key_missing")).toBeUndefined();
    });
  });

  describe("admit (GCRA)", () => {
    it("allows the burst, then refuses with the exact retry delay, then recovers", async () => {
      const store = await makeStore();
      const first = await store.admit(limited("k", 10, 2), NOW);
      const second = await store.admit(limited("k", 10, 2), NOW);
      const third = await store.admit(limited("k", 10, 2), NOW);
      expect(first).toMatchObject({ allowed: true, limit: 2, remaining: 1, retryAfterMs: 0 });
      expect(second).toMatchObject({ allowed: true, limit: 2, remaining: 0, retryAfterMs: 0 });
      expect(third).toEqual({ allowed: false, limit: 2, remaining: 0, resetMs: 200, retryAfterMs: 100, granted: 0 });
      // A refusal spends nothing: the same instant is refused again with the same delay.
      expect((await store.admit(limited("k", 10, 2), NOW + 50)).retryAfterMs).toBe(50);
      expect((await store.admit(limited("k", 10, 2), NOW + third.retryAfterMs)).allowed).toBe(true);
      expect((await store.admit(limited("k", 10, 2), NOW + third.retryAfterMs)).allowed).toBe(false);
    });

    it("takes an admitted call's hold in the same step, and none for a refused one", async () => {
      const { store, acc } = await withAccount(1_000);
      const key = { id: "k-hold", accountId: acc.id, rateLimitRps: 1, burst: 1 };
      const hold = (id: string, minimum: number, maximum: number): ReserveRequest => ({
        accountId: acc.id,
        period: PERIOD,
        reservationId: id,
        minimum,
        maximum,
        ttlMs: TTL,
        nowMs: NOW,
      });
      const admitted = await store.admit(key, NOW, hold("r1", 10, 600));
      expect(admitted).toMatchObject({ allowed: true, granted: 600 });
      expect(await store.balance(acc.id, PERIOD, NOW)).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 600 });
      const limitedOut = await store.admit(key, NOW, hold("r2", 10, 100));
      expect(limitedOut).toMatchObject({ allowed: false, granted: 0 });
      expect((await store.balance(acc.id, PERIOD, NOW)).reservedUsdMicros).toBe(600);
      // Admitted (a new second) but the cap cannot cover the minimum: the request is charged, nothing held.
      const capped = await store.admit(key, NOW + 1000, hold("r3", 500, 900));
      expect(capped).toMatchObject({ allowed: true, granted: 0 });
      expect((await store.balance(acc.id, PERIOD, NOW + 1000)).reservedUsdMicros).toBe(600);
      expect((await store.admit(key, NOW + 1000)).allowed).toBe(false);
    });

    it("keeps one bucket per key", async () => {
      const store = await makeStore();
      expect((await store.admit(limited("a", 1, 1), NOW)).allowed).toBe(true);
      expect((await store.admit(limited("a", 1, 1), NOW)).allowed).toBe(false);
      expect((await store.admit(limited("b", 1, 1), NOW)).allowed).toBe(true);
    });
  });

  describe("reservations", () => {
    it("grants min(maximum, cap - spent - reserved) when that reaches the minimum, else 0", async () => {
      const { reserve, balance, settle } = await withAccount(1_000);
      expect(await reserve("r1", 10, 300)).toBe(300);
      expect(await reserve("r2", 10, 900)).toBe(700);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
      expect(await reserve("r3", 1, 5)).toBe(0);
      await settle("r1", 100);
      // 200 freed by settling r1 below its hold.
      expect(await reserve("r4", 250, 400)).toBe(0);
      expect(await reserve("r5", 150, 400)).toBe(200);
      expect(await balance()).toEqual({ spentUsdMicros: 100, reservedUsdMicros: 900 });
    });

    it("refuses everything for an account without a cap and for an unknown account", async () => {
      const { reserve, store } = await withAccount(null);
      expect(await reserve("r1", 1, 10)).toBe(0);
      const ghost = await store.reserve({
        accountId: randomUUID(),
        period: PERIOD,
        reservationId: "x",
        minimum: 1,
        maximum: 10,
        ttlMs: TTL,
        nowMs: NOW,
      });
      expect(ghost).toBe(0);
    });

    it("extends a live reservation by the amount granted", async () => {
      const { reserve, balance } = await withAccount(1_000);
      expect(await reserve("r1", 10, 100)).toBe(100);
      expect(await reserve("r1", 50, 200)).toBe(200);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 300 });
      expect(await reserve("r1", 800, 900)).toBe(0);
      expect(await reserve("r1", 1, 900)).toBe(700);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
    });

    it("settles once: charges, drops the hold and writes one record; a second settle is a no-op", async () => {
      const { store, acc, reserve, balance, settle } = await withAccount(1_000);
      await reserve("r1", 10, 500);
      await settle("r1", 123);
      expect(await balance()).toEqual({ spentUsdMicros: 123, reservedUsdMicros: 0 });
      await settle("r1", 123);
      await settle("r1", 999);
      expect(await balance()).toEqual({ spentUsdMicros: 123, reservedUsdMicros: 0 });
      const page = await store.listUsageRecords(acc.id, 10, "");
      expect(page.records).toEqual([{ ...record(acc.id, "r1"), costUsdMicros: 123 }]);
      expect(page.nextPageToken).toBe("");
    });

    it("cuts a charge to what the cap still allows when the hold was lost, and records what it charged", async () => {
      const { store, acc, reserve, balance, settle } = await withAccount(1_000);
      await reserve("lost", 10, 600, { ttlMs: 1 });
      // The hold expires (say, a long outage); another call takes most of the cap meanwhile.
      await reserve("other", 10, 900, { nowMs: NOW + 10 });
      await settle("lost", 500);
      expect(await balance(NOW + 10)).toEqual({ spentUsdMicros: 100, reservedUsdMicros: 900 });
      expect((await store.listUsageRecords(acc.id, 10, "")).records[0]?.costUsdMicros).toBe(100);
    });

    it("settles a spend-cap abort without a record", async () => {
      const { store, acc, reserve, balance, settle } = await withAccount(1_000);
      await reserve("r1", 10, 500);
      await settle("r1", 40, false);
      expect(await balance()).toEqual({ spentUsdMicros: 40, reservedUsdMicros: 0 });
      expect((await store.listUsageRecords(acc.id, 10, "")).records).toEqual([]);
    });

    it("releases without charge and gives the capacity back", async () => {
      const { store, acc, reserve, balance } = await withAccount(1_000);
      expect(await reserve("r1", 10, 1_000)).toBe(1_000);
      await store.release(acc.id, PERIOD, "r1");
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 0 });
      expect(await reserve("r2", 1_000, 1_000)).toBe(1_000);
      await store.release(acc.id, PERIOD, "never-existed");
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
    });

    it("expires a reservation after its ttl, and a renewal pushes the expiry", async () => {
      const { reserve, balance } = await withAccount(1_000);
      expect(await reserve("r1", 10, 600)).toBe(600);
      expect(await reserve("r2", 10, 400)).toBe(400);
      expect(await reserve("r2", 0, 0, { nowMs: NOW + TTL - 1_000 })).toBe(0);
      expect((await balance(NOW + TTL - 1)).reservedUsdMicros).toBe(1_000);
      expect((await balance(NOW + TTL + 1)).reservedUsdMicros).toBe(400);
      expect(await reserve("r3", 600, 600, { nowMs: NOW + TTL + 1 })).toBe(600);
      expect((await balance(NOW + 2 * TTL + 10)).reservedUsdMicros).toBe(0);
    });

    it("renews a live hold with minimum 0 and maximum 0 even after the cap was lowered below it", async () => {
      const { store, acc, reserve, balance } = await withAccount(1_000);
      expect(await reserve("r1", 10, 800)).toBe(800);
      await store.updateAccount(acc.id, { spendCapUsdMicros: 500 });
      expect(await reserve("r1", 0, 0, { nowMs: NOW + TTL - 1_000 })).toBe(0);
      // The call behind r1 is still running: its hold must not lapse and free budget for others.
      expect((await balance(NOW + TTL + 1)).reservedUsdMicros).toBe(800);
      expect(await reserve("r2", 1, 100, { nowMs: NOW + TTL + 1 })).toBe(0);
    });

    it("keeps periods and accounts apart", async () => {
      const { store, reserve, balance, settle } = await withAccount(1_000);
      await reserve("r1", 10, 1_000);
      await settle("r1", 1_000, false);
      expect(await balance(NOW, "2026-12")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 0 });
      expect(await reserve("r2", 10, 500, { period: "2026-12" })).toBe(500);
      const other = account({ spendCapUsdMicros: 50 });
      await store.createAccount(other);
      expect(
        await store.reserve({
          accountId: other.id,
          period: PERIOD,
          reservationId: "r1",
          minimum: 1,
          maximum: 50,
          ttlMs: TTL,
          nowMs: NOW,
        }),
      ).toBe(50);
    });

    it("never lets spent + reserved pass the cap under 100 concurrent reserves", async () => {
      const { reserve, balance } = await withAccount(1_000);
      const grants = await Promise.all(Array.from({ length: 100 }, (_, i) => reserve(`r${i}`, 7, 13)));
      const total = grants.reduce((s, g) => s + g, 0);
      for (const g of grants) expect(g === 0 || (g >= 7 && g <= 13)).toBe(true);
      expect(total).toBeLessThanOrEqual(1_000);
      // Granting stops only when less than a minimum is left.
      expect(total).toBeGreaterThan(1_000 - 7);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: total });
    });

    it("holds the invariant while reserves, extensions, settles and releases interleave", async () => {
      const { store, acc, reserve, balance, settle } = await withAccount(2_000);
      const charged: number[] = [];
      const calls = Array.from({ length: 100 }, async (_, i) => {
        const id = `c${i}`;
        const held = await reserve(id, 5, 40);
        if (held === 0) return;
        const more = await reserve(id, 1, 20);
        const mid = await balance();
        expect(mid.spentUsdMicros + mid.reservedUsdMicros).toBeLessThanOrEqual(2_000);
        if (i % 3 === 0) return store.release(acc.id, PERIOD, id);
        const charge = Math.max(1, held + more - 10);
        charged.push(charge);
        return settle(id, charge, i % 2 === 0);
      });
      await Promise.all(calls);
      const end = await balance();
      expect(end.reservedUsdMicros).toBe(0);
      expect(end.spentUsdMicros).toBe(charged.reduce((s, c) => s + c, 0));
      expect(end.spentUsdMicros).toBeLessThanOrEqual(2_000);
    });
  });

  describe("usage records", () => {
    async function withRecords(count: number) {
      const ctx = await withAccount(1_000_000);
      for (let i = 1; i <= count; i++) {
        await ctx.store.settle({
          accountId: ctx.acc.id,
          period: PERIOD,
          reservationId: `u${i}`,
          chargeUsdMicros: 13,
          record: record(ctx.acc.id, `u${i}`, NOW + i),
        });
      }
      return ctx;
    }

    async function walk(store: Store, accountId: string, pageSize: number): Promise<string[][]> {
      const pages: string[][] = [];
      let token = "";
      do {
        const page = await store.listUsageRecords(accountId, pageSize, token);
        pages.push(page.records.map((r) => r.id));
        token = page.nextPageToken;
      } while (token && pages.length < 100);
      return pages;
    }

    it("lists newest first and walks every record exactly once", async () => {
      const { store, acc } = await withRecords(7);
      expect(await walk(store, acc.id, 3)).toEqual([["u7", "u6", "u5"], ["u4", "u3", "u2"], ["u1"]]);
      expect(await walk(store, acc.id, 7)).toEqual([["u7", "u6", "u5", "u4", "u3", "u2", "u1"]]);
      expect(await walk(store, acc.id, 100)).toEqual([["u7", "u6", "u5", "u4", "u3", "u2", "u1"]]);
      const [first] = (await store.listUsageRecords(acc.id, 1, "")).records;
      expect(first).toEqual(record(acc.id, "u7", NOW + 7));
    });

    it("neither skips nor repeats when a record is added mid-walk", async () => {
      const { store, acc } = await withRecords(5);
      const page1 = await store.listUsageRecords(acc.id, 2, "");
      await store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId: "u6",
        chargeUsdMicros: 13,
        record: record(acc.id, "u6", NOW + 6),
      });
      const page2 = await store.listUsageRecords(acc.id, 2, page1.nextPageToken);
      const page3 = await store.listUsageRecords(acc.id, 2, page2.nextPageToken);
      expect([...page1.records, ...page2.records, ...page3.records].map((r) => r.id)).toEqual([
        "u5",
        "u4",
        "u3",
        "u2",
        "u1",
      ]);
      expect(page3.nextPageToken).toBe("");
    });

    it("returns an empty last page for an account without records", async () => {
      const { store, acc } = await withAccount();
      expect(await store.listUsageRecords(acc.id, 10, "")).toEqual({ records: [], nextPageToken: "" });
    });

    it("refuses a page token it did not issue", async () => {
      const { store, acc } = await withRecords(3);
      for (const token of [
        "nope",
        "!!!",
        Buffer.from("p:abc").toString("base64url"),
        Buffer.from("x:1").toString("base64url"),
      ]) {
        await expect(store.listUsageRecords(acc.id, 10, token)).rejects.toBeInstanceOf(InvalidPageTokenError);
      }
    });
  });

  it("answers ping", async () => {
    await expect((await makeStore()).ping()).resolves.toBeUndefined();
  });
});
