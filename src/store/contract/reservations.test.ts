import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { account, contractBackends, NOW, PERIOD, TTL, withAccount } from "./support.ts";

/** Taking, growing, renewing and expiring reservations (`extendReservation`). */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("reservations", () => {
    it("grants min(maximum, cap - spent - reserved) when that reaches the minimum, else 0", async () => {
      const { extend, balance, settle } = await withAccount(makeStore, 1_000);
      expect(await extend("r1", 10, 300)).toBe(300);
      expect(await extend("r2", 10, 900)).toBe(700);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
      expect(await extend("r3", 1, 5)).toBe(0);
      await settle("r1", 100);
      // 200 freed by settling r1 below its hold.
      expect(await extend("r4", 250, 400)).toBe(0);
      expect(await extend("r5", 150, 400)).toBe(200);
      expect(await balance()).toEqual({ spentUsdMicros: 100, reservedUsdMicros: 900 });
    });

    it("refuses everything for an account without a cap and for an unknown account", async () => {
      const { extend, store } = await withAccount(makeStore, null);
      expect(await extend("r1", 1, 10)).toBe(0);
      const ghost = await store.extendReservation({
        accountId: randomUUID(),
        period: PERIOD,
        reservationId: "x",
        minimum: 1,
        maximum: 10,
        ttlMs: TTL,
        nowMs: NOW,
      });
      expect(ghost).toEqual({ granted: 0 });
    });

    it("extends a live reservation by the amount granted", async () => {
      const { extend, balance } = await withAccount(makeStore, 1_000);
      expect(await extend("r1", 10, 100)).toBe(100);
      expect(await extend("r1", 50, 200)).toBe(200);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 300 });
      expect(await extend("r1", 800, 900)).toBe(0);
      expect(await extend("r1", 1, 900)).toBe(700);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
    });

    it("expires a reservation after its ttl, and a renewal pushes the expiry", async () => {
      const { extend, balance } = await withAccount(makeStore, 1_000);
      expect(await extend("r1", 10, 600)).toBe(600);
      expect(await extend("r2", 10, 400)).toBe(400);
      expect(await extend("r2", 0, 0, { nowMs: NOW + TTL - 1_000 })).toBe(0);
      expect((await balance(NOW + TTL - 1)).reservedUsdMicros).toBe(1_000);
      expect((await balance(NOW + TTL + 1)).reservedUsdMicros).toBe(400);
      expect(await extend("r3", 600, 600, { nowMs: NOW + TTL + 1 })).toBe(600);
      expect((await balance(NOW + 2 * TTL + 10)).reservedUsdMicros).toBe(0);
    });

    it("renews a live hold with minimum 0 and maximum 0 even after the cap was lowered below it", async () => {
      const { store, acc, extend, balance } = await withAccount(makeStore, 1_000);
      expect(await extend("r1", 10, 800)).toBe(800);
      await store.updateAccount({ accountId: acc.id, patch: { spendCapUsdMicros: 500 } });
      expect(await extend("r1", 0, 0, { nowMs: NOW + TTL - 1_000 })).toBe(0);
      // The call behind r1 is still running: its hold must not lapse and free budget for others.
      expect((await balance(NOW + TTL + 1)).reservedUsdMicros).toBe(800);
      expect(await extend("r2", 1, 100, { nowMs: NOW + TTL + 1 })).toBe(0);
    });

    it("keeps periods and accounts apart", async () => {
      const { store, extend, balance, settle } = await withAccount(makeStore, 1_000);
      await extend("r1", 10, 1_000);
      await settle("r1", 1_000, false);
      expect(await balance(NOW, "2026-12")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 0 });
      expect(await extend("r2", 10, 500, { period: "2026-12" })).toBe(500);
      const other = account({ spendCapUsdMicros: 50 });
      await store.createAccount(other);
      expect(
        await store.extendReservation({
          accountId: other.id,
          period: PERIOD,
          reservationId: "r1",
          minimum: 1,
          maximum: 50,
          ttlMs: TTL,
          nowMs: NOW,
        }),
      ).toEqual({ granted: 50 });
    });

    it("never lets spent + reserved pass the cap under 100 concurrent reservations", async () => {
      const { extend, balance } = await withAccount(makeStore, 1_000);
      const grants = await Promise.all(Array.from({ length: 100 }, (_, i) => extend(`r${i}`, 7, 13)));
      const total = grants.reduce((s, g) => s + g, 0);
      for (const g of grants) expect(g === 0 || (g >= 7 && g <= 13)).toBe(true);
      expect(total).toBeLessThanOrEqual(1_000);
      // Granting stops only when less than a minimum is left.
      expect(total).toBeGreaterThan(1_000 - 7);
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: total });
    });
  });
});
