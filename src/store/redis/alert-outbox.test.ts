import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { redisBackends } from "../../../test/support/redis-backends.ts";
import { PERCENTS } from "../contract/alert-support.ts";
import { account, NOW, PERIOD } from "../contract/support.ts";
import { connectRedis } from "./client.ts";
import { createRedisStore, type RedisStore } from "./index.ts";
import { createKeys } from "./keys.ts";

/**
 * What only Redis has to survive: a process that dies between a settle and the move of its alerts
 * to the queue (its outbox is swept later, by SCAN over every node), moves repeated by several
 * processes (each alert queued once), and a dispatcher that dies between reading an alert and
 * fanning it out (another takes it over with XAUTOCLAIM).
 */
const { backends, clients, stores } = redisBackends();

describe.each(backends)("spend alerts' outboxes and queue: %s", (_name, urlOf) => {
  /** Stores on one fresh prefix: `crashing` never moves its outboxes, `healthy` does. */
  async function deployment() {
    const url = await urlOf();
    const prefix = `wh${randomUUID().slice(0, 8)}`;
    const open = async (moveAlertOutboxes: boolean) => {
      const store = createRedisStore({ redis: await connectRedis(url), prefix, serverTime: false, moveAlertOutboxes });
      stores.push(store);
      return store;
    };
    const [crashing, healthy] = [await open(false), await open(true)];
    const raw = await connectRedis(url);
    clients.push(raw);
    const acc = account({ spendCapUsdMicros: 1_000 });
    await healthy.createAccount(acc);
    await healthy.webhooks.createEndpoint({
      id: "e",
      url: "http://127.0.0.1:9/",
      secret: "whsec_x",
      createTimeMs: NOW,
    });
    const settle = (store: RedisStore, id: string, charge: number) =>
      store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId: id,
        chargeUsdMicros: charge,
        nowMs: NOW,
        alertPercents: PERCENTS,
      });
    const claimAll = async (store: RedisStore, consumer = "c") => {
      await store.webhooks.fanOut({ consumer, nowMs: NOW, max: 100, claimIdleMs: 60_000 });
      return store.webhooks.claimDue({ nowMs: NOW, leaseMs: 60_000, max: 100 });
    };
    return { crashing, healthy, raw, keys: createKeys(prefix), acc, settle, claimAll };
  }

  it("sweeps an outbox a settling process left behind, once, and then finds nothing", async () => {
    const { crashing, healthy, raw, keys, acc, settle, claimAll } = await deployment();
    await settle(crashing, "c1", 900);
    expect(await raw.xlen(keys.alertOutbox(acc.id))).toBe(2);
    expect(await claimAll(healthy)).toEqual([]);
    expect(await healthy.webhooks.sweep()).toBe(2);
    expect(await raw.exists(keys.alertOutbox(acc.id))).toBe(0);
    expect((await claimAll(healthy)).map((d) => d.alert.thresholdPercent).sort()).toEqual([50, 80]);
    expect(await healthy.webhooks.sweep()).toBe(0);
  });

  it("queues each alert once however many processes move the same outbox at once", async () => {
    const { crashing, healthy, settle, claimAll } = await deployment();
    await settle(crashing, "c1", 1_000);
    const moved = await Promise.all([healthy.webhooks.sweep(), crashing.webhooks.sweep(), healthy.webhooks.sweep()]);
    expect(moved.reduce((a, b) => a + b, 0)).toBe(3);
    const due = await claimAll(healthy);
    expect(due.map((d) => d.alert.thresholdPercent).sort()).toEqual([100, 50, 80]);
    expect(new Set(due.map((d) => d.alert.id)).size).toBe(3);
  });

  it("sweeps once per interval across processes when asked to", async () => {
    const { crashing, healthy, settle } = await deployment();
    await settle(crashing, "c1", 500);
    expect(await healthy.webhooks.sweep({ everyMs: 60_000 })).toBe(1);
    await settle(crashing, "c2", 400);
    expect(await crashing.webhooks.sweep({ everyMs: 60_000 })).toBe(0);
    expect(await crashing.webhooks.sweep()).toBe(1);
  });

  it("takes over an alert whose dispatcher read it and died before fanning it out", async () => {
    const { healthy, raw, keys, settle, claimAll } = await deployment();
    await settle(healthy, "c1", 500);
    // A dispatcher that reads the alert as a consumer of the group, then dies.
    await raw.xgroup("CREATE", keys.webhooks.queue, "dispatchers", "0", "MKSTREAM");
    const read = await raw.xreadgroup("GROUP", "dispatchers", "dead", "COUNT", 10, "STREAMS", keys.webhooks.queue, ">");
    expect(read).not.toBeNull();
    expect(await claimAll(healthy, "alive")).toEqual([]);
    const taken = await healthy.webhooks.fanOut({ consumer: "alive", nowMs: NOW, max: 100, claimIdleMs: 0 });
    expect(taken).toBe(1);
    expect(
      (await healthy.webhooks.claimDue({ nowMs: NOW, leaseMs: 1, max: 10 })).map((d) => d.alert.thresholdPercent),
    ).toEqual([50]);
    expect(await raw.xlen(keys.webhooks.queue)).toBe(0);
    await healthy.webhooks.leave("dead");
    await healthy.webhooks.leave("alive");
    const consumers = (await raw.xinfo("CONSUMERS", keys.webhooks.queue, "dispatchers")) as unknown[];
    expect(consumers).toEqual([]);
  });
});
