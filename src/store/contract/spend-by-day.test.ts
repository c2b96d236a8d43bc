import { describe, expect, it } from "vitest";
import { contractBackends, PERIOD, withAccount } from "./support.ts";

const DAY = 86_400_000;
/** Noon on a day of November 2026, the contract's period. */
const nov = (day: number) => Date.UTC(2026, 10, day, 12, 0, 0);

/** A period's charges by UTC day: each settle adds to its day in the same step as to spent. */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("spend by day", () => {
    it("counts each charge on its UTC day, abort charges too, and the days sum to spent", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 1_000);
      expect(await store.spendByDay({ accountId: acc.id, period: PERIOD })).toEqual([]);
      await extend("a", 1, 100);
      await settle("a", 30, true, nov(5));
      await extend("b", 1, 100);
      await settle("b", 12, false, nov(3)); // a spend-cap abort: charged, without a record
      await extend("c", 1, 100);
      await settle("c", 8, true, nov(5) + 11 * 3_600_000); // 23:00 the same day
      await extend("d", 1, 100);
      await settle("d", 0, true, nov(7)); // nothing charged: no day
      await extend("e", 1, 100);
      await settle("e", 5, true, Date.UTC(2026, 10, 6, 0, 0, 0)); // midnight opens a day
      await settle("a", 99, true, nov(9)); // a repeated settle charges nothing, on no day
      const days = await store.spendByDay({ accountId: acc.id, period: PERIOD });
      expect(days).toEqual([
        { date: "2026-11-03", spentUsdMicros: 12 },
        { date: "2026-11-05", spentUsdMicros: 38 },
        { date: "2026-11-06", spentUsdMicros: 5 },
      ]);
      const { spentUsdMicros } = await balance();
      expect(days.reduce((sum, d) => sum + d.spentUsdMicros, 0)).toBe(spentUsdMicros);
      expect(await store.spendByDay({ accountId: acc.id, period: "2026-10" })).toEqual([]);
    });

    it("counts a charge cut by the cap at what it charged, so the days still sum to spent", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 100);
      await extend("lost", 10, 60, { ttlMs: 1 });
      await extend("other", 10, 70, { nowMs: nov(15) + 10 });
      await settle("lost", 50, false, nov(4)); // the cap leaves 30 of it
      await settle("other", 70, true, nov(4));
      expect(await store.spendByDay({ accountId: acc.id, period: PERIOD })).toEqual([
        { date: "2026-11-04", spentUsdMicros: 100 },
      ]);
      expect((await balance(nov(15) + 10)).spentUsdMicros).toBe(100);
    });

    it("counts a charge settled outside its period on the period's nearest day", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 1_000);
      await extend("late", 1, 100);
      // A November call that ends one second into December counts on November 30th.
      await settle("late", 20, true, Date.UTC(2026, 11, 1, 0, 0, 1));
      await extend("later", 1, 100);
      await settle("later", 3, true, Date.UTC(2027, 0, 9));
      // A clock behind the period's start (a skewed server) counts on its first day.
      await extend("early", 1, 100);
      await settle("early", 7, false, Date.UTC(2026, 9, 31, 23, 59, 59));
      await extend("first", 1, 100);
      await settle("first", 1, true, nov(1) - 12 * 3_600_000);
      await extend("last", 1, 100);
      await settle("last", 2, true, nov(30) + 12 * 3_600_000 - 1);
      expect(await store.spendByDay({ accountId: acc.id, period: PERIOD })).toEqual([
        { date: "2026-11-01", spentUsdMicros: 8 },
        { date: "2026-11-30", spentUsdMicros: 25 },
      ]);
      expect((await balance()).spentUsdMicros).toBe(33);
    });

    it("names every day of a leap year's February by its UTC date", async () => {
      const { store, acc } = await withAccount(makeStore, 1_000_000);
      const feb = (day: number) => Date.UTC(2028, 1, day, 23, 59, 59, 999);
      for (let day = 1; day <= 29; day++)
        await store.settle({
          accountId: acc.id,
          period: "2028-02",
          reservationId: `f${day}`,
          chargeUsdMicros: day,
          nowMs: feb(day),
        });
      await store.settle({
        accountId: acc.id,
        period: "2028-02",
        reservationId: "march",
        chargeUsdMicros: 100,
        nowMs: feb(29) + DAY,
      });
      const days = await store.spendByDay({ accountId: acc.id, period: "2028-02" });
      expect(days.map((d) => d.date)).toEqual(
        Array.from({ length: 29 }, (_, i) => `2028-02-${String(i + 1).padStart(2, "0")}`),
      );
      expect(days.map((d) => d.spentUsdMicros)).toEqual([...Array.from({ length: 28 }, (_, i) => i + 1), 129]);
    });
  });
});
