import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisServer, type RedisServer } from "../../../test/support/redis-server.ts";
import type { Store } from "../store.ts";
import { connectRedis } from "./client.ts";
import { createRedisStore } from "./index.ts";

/**
 * Processes whose clocks disagree must still agree on holds: with the server's clock, a
 * process running a minute ahead cannot expire another's live hold and grant the cap twice.
 */
describe("Redis store clock", () => {
  let server: RedisServer;
  const stores: Store[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await server?.close();
  });

  async function twoProcesses(serverTime: boolean) {
    const prefix = `clock${randomUUID().slice(0, 6)}`;
    const make = async () => {
      const store = createRedisStore({ redis: await connectRedis(server.url), prefix, serverTime });
      stores.push(store);
      return store;
    };
    const [a, b] = [await make(), await make()];
    const accountId = randomUUID();
    await a.createAccount({
      id: accountId,
      spendCapUsdMicros: 1_000,
      onboardingComplete: true,
      paymentStatus: "ok",
      subscriptionStatus: "active",
      createTimeMs: Date.now(),
    });
    const hold = async (store: Store, id: string, nowMs: number) => (await grantOf(store, id, nowMs)).granted;
    const grantOf = (store: Store, id: string, nowMs: number) =>
      store.extendReservation({
        accountId,
        period: "2026-11",
        reservationId: id,
        minimum: 1_000,
        maximum: 1_000,
        ttlMs: 60_000,
        nowMs,
      });
    return { a, b, hold, grantOf, accountId };
  }

  it("refuses a second hold from a process whose clock runs 61 s ahead", async () => {
    const { a, b, hold, grantOf } = await twoProcesses(true);
    expect(await hold(a, "first", Date.now())).toBe(1_000);
    const refused = await grantOf(b, "second", Date.now() + 61_000);
    expect(refused.granted).toBe(0);
    // Held by the first call, which expires 60 s after it was taken by the server's clock: the
    // wait is measured on that clock too, not on the skewed caller's (which would see it gone).
    expect(refused.heldByOthersMs).toBeGreaterThan(55_000);
    expect(refused.heldByOthersMs).toBeLessThanOrEqual(60_000);
  });

  it("shows the hazard the server clock removes: caller clocks would grant the cap twice", async () => {
    const { a, b, hold } = await twoProcesses(false);
    expect(await hold(a, "first", Date.now())).toBe(1_000);
    expect(await hold(b, "second", Date.now() + 61_000)).toBe(1_000);
  });

  it("counts a charge on the server's day, whatever the caller's clock says", async () => {
    const { a, accountId } = await twoProcesses(true);
    const today = new Date().toISOString().slice(0, 10);
    const period = today.slice(0, 7);
    await a.settle({ accountId, period, reservationId: "s1", chargeUsdMicros: 5, nowMs: Date.UTC(1999, 0, 15) });
    // A settle at midnight may see tomorrow's date; either way it is the server's, not 1999's.
    const days = await a.spendByDay({ accountId, period });
    expect(days).toHaveLength(1);
    const date = days[0]?.date ?? "";
    expect(date.startsWith(`${period}-`) && date >= today).toBe(true);
  });
});
