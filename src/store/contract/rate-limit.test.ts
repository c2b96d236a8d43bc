import { describe, expect, it } from "vitest";
import { contractBackends, limited, NOW, withAccount } from "./support.ts";

describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("chargeRateLimit (GCRA)", () => {
    it("allows the burst, then refuses with the exact retry delay, then recovers", async () => {
      const store = await makeStore();
      const charge = (nowMs: number) => store.chargeRateLimit({ key: limited("k", 10, 2), nowMs });
      const first = await charge(NOW);
      const second = await charge(NOW);
      const third = await charge(NOW);
      expect(first).toMatchObject({ allowed: true, limit: 2, remaining: 1, retryAfterMs: 0 });
      expect(second).toMatchObject({ allowed: true, limit: 2, remaining: 0, retryAfterMs: 0 });
      expect(third).toEqual({ allowed: false, limit: 2, remaining: 0, resetMs: 200, retryAfterMs: 100, granted: 0 });
      // A refusal spends nothing: the same instant is refused again with the same delay.
      expect((await charge(NOW + 50)).retryAfterMs).toBe(50);
      expect((await charge(NOW + third.retryAfterMs)).allowed).toBe(true);
      expect((await charge(NOW + third.retryAfterMs)).allowed).toBe(false);
    });

    it("takes an allowed call's reservation in the same step, and none for a refused one", async () => {
      const { store, acc, reserve, balance } = await withAccount(makeStore, 1_000);
      const key = { id: "k-hold", accountId: acc.id, rateLimitRps: 1, burst: 1 };
      const allowed = await store.chargeRateLimit({ key, nowMs: NOW, reserve: reserve("r1", 10, 600) });
      expect(allowed).toMatchObject({ allowed: true, granted: 600 });
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 600 });
      const limitedOut = await store.chargeRateLimit({ key, nowMs: NOW, reserve: reserve("r2", 10, 100) });
      expect(limitedOut).toMatchObject({ allowed: false, granted: 0 });
      expect((await balance()).reservedUsdMicros).toBe(600);
      // Allowed (a new second) but the cap cannot cover the minimum: the request is charged, nothing held.
      const capped = await store.chargeRateLimit({ key, nowMs: NOW + 1000, reserve: reserve("r3", 500, 900) });
      expect(capped).toMatchObject({ allowed: true, granted: 0 });
      expect((await balance(NOW + 1000)).reservedUsdMicros).toBe(600);
      expect((await store.chargeRateLimit({ key, nowMs: NOW + 1000 })).allowed).toBe(false);
    });

    it("keeps one bucket per key", async () => {
      const store = await makeStore();
      const charge = (id: string) => store.chargeRateLimit({ key: limited(id, 1, 1), nowMs: NOW });
      expect((await charge("a")).allowed).toBe(true);
      expect((await charge("a")).allowed).toBe(false);
      expect((await charge("b")).allowed).toBe(true);
    });
  });
});
