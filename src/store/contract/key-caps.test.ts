import { describe, expect, it } from "vitest";
import { withKeys } from "./key-support.ts";
import { contractBackends, NOW, PERIOD, record, TTL } from "./support.ts";

/**
 * A key's own monthly cap, besides its account's: a hold is taken only when both have room, and
 * holds, extensions, settles and releases count against both in one atomic step (one script in
 * the account's slot on Redis and Redis Cluster).
 */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("key caps", () => {
    it("holds no more than either cap leaves, and says which cap refused", async () => {
      const { grant, balance, keyBalance } = await withKeys(makeStore, 1_000, { a: { spendCapUsdMicros: 300 }, b: {} });
      expect(await grant("a1", "a", 1, 500)).toEqual({ granted: 300 });
      // The key's cap is held: refused by it, temporarily (only a1's hold is in the way).
      expect(await grant("a2", "a", 1, 100)).toEqual({ granted: 0, heldByOthersMs: TTL, byKeyCap: true });
      // A key without a cap of its own has what the account has left.
      expect(await grant("b1", "b", 1, 900)).toEqual({ granted: 700 });
      expect(await grant("b2", "b", 1, 100)).toEqual({ granted: 0, heldByOthersMs: TTL });
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 1_000 });
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 300 });
      expect(await keyBalance("b")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 700 });
    });

    it("refuses for good (not temporary) once the key's spend leaves too little, the account has room", async () => {
      const { grant, settle, keyBalance, balance } = await withKeys(makeStore, 10_000, {
        a: { spendCapUsdMicros: 100 },
      });
      expect((await grant("a1", "a", 1, 100)).granted).toBe(100);
      expect(await settle("a1", "a", 90)).toBe("settled");
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 90, reservedUsdMicros: 0 });
      expect(await grant("a2", "a", 20, 50)).toEqual({ granted: 0, byKeyCap: true });
      expect(await grant("a3", "a", 1, 50)).toEqual({ granted: 10 });
      expect(await balance()).toEqual({ spentUsdMicros: 90, reservedUsdMicros: 10 });
    });

    it("names the account when both caps are short and the account's spend is the lasting cause", async () => {
      const { grant, settle } = await withKeys(makeStore, 100, { a: { spendCapUsdMicros: 100 }, b: {} });
      expect((await grant("b1", "b", 1, 100)).granted).toBe(100);
      await settle("b1", "b", 100);
      expect(await grant("a1", "a", 1, 10)).toEqual({ granted: 0 });
    });

    it("waits for the key's own holds, not the account's, when only the key's cap is held", async () => {
      const { grant } = await withKeys(makeStore, 10_000, { a: { spendCapUsdMicros: 500 }, b: {} });
      expect((await grant("b-early", "b", 1, 100)).granted).toBe(100);
      expect((await grant("a-later", "a", 1, 400, NOW + 5_000)).granted).toBe(400);
      // b's hold expires first, but it does not count against a's cap: the wait is for a's own.
      expect(await grant("a2", "a", 200, 200, NOW + 6_000)).toEqual({
        granted: 0,
        heldByOthersMs: TTL - 1_000,
        byKeyCap: true,
      });
      // Its own hold is its own: growing a-later past the cap is lasting.
      expect(await grant("a-later", "a", 200, 200, NOW + 6_000)).toEqual({ granted: 0, byKeyCap: true });
    });

    it("settles against both caps, adding the charge to the key's spend; a release frees both", async () => {
      const { grant, settle, release, keyBalance, balance } = await withKeys(makeStore, 1_000, {
        a: { spendCapUsdMicros: 400 },
      });
      expect((await grant("s", "a", 1, 200)).granted).toBe(200);
      expect((await grant("r", "a", 1, 200)).granted).toBe(200);
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 400 });
      expect(await settle("s", "a", 150)).toBe("settled");
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 150, reservedUsdMicros: 200 });
      expect(await release("r", "a")).toBe("released");
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 150, reservedUsdMicros: 0 });
      expect(await balance()).toEqual({ spentUsdMicros: 150, reservedUsdMicros: 0 });
      // Settled and released ids stay closed: nothing moves again.
      expect(await settle("r", "a", 100)).toBe("released");
      expect(await release("s", "a")).toBe("settled");
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 150, reservedUsdMicros: 0 });
      expect((await grant("next", "a", 1, 1_000)).granted).toBe(250);
    });

    it("cuts a settle whose hold expired to what the key's cap still allows, and its record says so", async () => {
      const { store, acc, keyOf, grant, settle, keyBalance } = await withKeys(makeStore, 10_000, {
        a: { spendCapUsdMicros: 300 },
      });
      expect((await grant("lost", "a", 1, 200)).granted).toBe(200);
      // The hold expires (a stalled process); another call of the key takes most of the cap.
      expect((await grant("other", "a", 1, 250, NOW + TTL)).granted).toBe(250);
      const done = await store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId: "lost",
        apiKeyId: keyOf("a").id,
        chargeUsdMicros: 200,
        nowMs: NOW + TTL,
        record: record(acc.id, "lost"),
      });
      expect(done).toBe("settled");
      expect(await keyBalance("a", NOW + TTL)).toEqual({ spentUsdMicros: 50, reservedUsdMicros: 250 });
      const page = await store.listUsageRecords({ accountId: acc.id, pageSize: 10, pageToken: "" });
      expect(page.records.map((r) => r.costUsdMicros)).toEqual([50]);
      expect(await settle("other", "a", 250, { nowMs: NOW + TTL })).toBe("settled");
      expect(await keyBalance("a", NOW + TTL)).toEqual({ spentUsdMicros: 300, reservedUsdMicros: 0 });
    });

    it("reads a changed cap in the next step, and none once it is removed", async () => {
      const { store, keyOf, grant } = await withKeys(makeStore, 10_000, { a: { spendCapUsdMicros: 100 } });
      expect((await grant("one", "a", 1, 1_000)).granted).toBe(100);
      const raised = await store.updateApiKey({ apiKeyId: keyOf("a").id, patch: { spendCapUsdMicros: 600 } });
      expect(raised?.spendCapUsdMicros).toBe(600);
      expect((await grant("two", "a", 1, 1_000)).granted).toBe(500);
      // Lowered below what is held: growth is refused, the holds stay.
      await store.updateApiKey({ apiKeyId: keyOf("a").id, patch: { spendCapUsdMicros: 50 } });
      expect(await grant("two", "a", 1, 10)).toEqual({ granted: 0, byKeyCap: true });
      const removed = await store.updateApiKey({ apiKeyId: keyOf("a").id, patch: { spendCapUsdMicros: null } });
      expect(removed?.spendCapUsdMicros).toBeUndefined();
      expect((await grant("three", "a", 1, 1_000)).granted).toBe(1_000);
      expect(await store.updateApiKey({ apiKeyId: "key_missing", patch: { spendCapUsdMicros: 1 } })).toBeUndefined();
    });

    it("answers the same in the admission step, with the request rate", async () => {
      const { admit, keyBalance } = await withKeys(makeStore, 1_000, { a: { spendCapUsdMicros: 300 } });
      expect(await admit("x", "a", 1, 500)).toMatchObject({ allowed: true, granted: 300 });
      const held = await admit("y", "a", 1, 500);
      expect(held).toMatchObject({ allowed: true, granted: 0, heldByOthersMs: TTL, byKeyCap: true });
      expect(await keyBalance("a")).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 300 });
    });

    it("never passes either cap under many concurrent admissions of two keys", async () => {
      const { grant, admit, settle, keyBalance, balance } = await withKeys(makeStore, 4_000, {
        capped: { spendCapUsdMicros: 1_200 },
        open: {},
      });
      const calls = Array.from({ length: 120 }, (_, i) => {
        const key = i % 3 === 0 ? "open" : "capped";
        const id = `c${i}`;
        const take = i % 2 === 0 ? admit(id, key, 10, 90) : grant(id, key, 10, 90);
        return take.then(async ({ granted: amount }) => {
          if (amount > 0 && i % 4 === 0) await settle(id, key, amount);
          return { key, amount };
        });
      });
      const results = await Promise.all(calls);
      const held = (key: string) => results.filter((r) => r.key === key).reduce((s, r) => s + r.amount, 0);
      expect(held("capped")).toBeLessThanOrEqual(1_200);
      expect(held("capped") + held("open")).toBeLessThanOrEqual(4_000);
      const [capped, open, account] = [await keyBalance("capped"), await keyBalance("open"), await balance()];
      expect(capped.spentUsdMicros + capped.reservedUsdMicros).toBe(held("capped"));
      expect(capped.spentUsdMicros + capped.reservedUsdMicros).toBeLessThanOrEqual(1_200);
      expect(account.spentUsdMicros + account.reservedUsdMicros).toBe(held("capped") + held("open"));
      expect(open.spentUsdMicros + open.reservedUsdMicros).toBe(held("open"));
      // Both caps were reached: the test asked for more than either allows.
      expect(held("capped")).toBeGreaterThan(1_200 - 10);
      expect(account.spentUsdMicros + account.reservedUsdMicros).toBeGreaterThan(4_000 - 10);
    });
  });
});
