import { describe, expect, it } from "vitest";
import { contractBackends, NOW, record, withAccount } from "./support.ts";

/** How a call's reservation ends: one settle or one release per completion id. */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("settle and release", () => {
    it("settles once: charges, drops the hold and writes one record; a second settle is a no-op", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 1_000);
      await extend("r1", 10, 500);
      await settle("r1", 123);
      expect(await balance()).toEqual({ spentUsdMicros: 123, reservedUsdMicros: 0 });
      await settle("r1", 123);
      await settle("r1", 999);
      expect(await balance()).toEqual({ spentUsdMicros: 123, reservedUsdMicros: 0 });
      const page = await store.listUsageRecords({ accountId: acc.id, pageSize: 10, pageToken: "" });
      expect(page.records).toEqual([{ ...record(acc.id, "r1"), costUsdMicros: 123 }]);
      expect(page.nextPageToken).toBe("");
    });

    it("cuts a charge to what the cap still allows when the hold was lost, and records what it charged", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 1_000);
      await extend("lost", 10, 600, { ttlMs: 1 });
      // The hold expires (say, a long outage); another call takes most of the cap meanwhile.
      await extend("other", 10, 900, { nowMs: NOW + 10 });
      await settle("lost", 500);
      expect(await balance(NOW + 10)).toEqual({ spentUsdMicros: 100, reservedUsdMicros: 900 });
      const page = await store.listUsageRecords({ accountId: acc.id, pageSize: 10, pageToken: "" });
      expect(page.records[0]?.costUsdMicros).toBe(100);
    });

    it("settles a spend-cap abort without a record", async () => {
      const { store, acc, extend, balance, settle } = await withAccount(makeStore, 1_000);
      await extend("r1", 10, 500);
      await settle("r1", 40, false);
      expect(await balance()).toEqual({ spentUsdMicros: 40, reservedUsdMicros: 0 });
      expect((await store.listUsageRecords({ accountId: acc.id, pageSize: 10, pageToken: "" })).records).toEqual([]);
    });

    it("releases without charge and gives the capacity back", async () => {
      const { extend, balance, release } = await withAccount(makeStore, 1_000);
      expect(await extend("r1", 10, 1_000)).toBe(1_000);
      await release("r1");
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 0 });
      expect(await extend("r2", 1_000, 1_000)).toBe(1_000);
      await release("never-existed");
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
    });

    it("holds the invariant while reservations, extensions, settles and releases interleave", async () => {
      const { extend, balance, settle, release } = await withAccount(makeStore, 2_000);
      const charged: number[] = [];
      const calls = Array.from({ length: 100 }, async (_, i) => {
        const id = `c${i}`;
        const held = await extend(id, 5, 40);
        if (held === 0) return;
        const more = await extend(id, 1, 20);
        const mid = await balance();
        expect(mid.spentUsdMicros + mid.reservedUsdMicros).toBeLessThanOrEqual(2_000);
        if (i % 3 === 0) return release(id);
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
});
