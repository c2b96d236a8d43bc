import { describe, expect, it } from "vitest";
import { contractBackends, NOW, TTL, withAccount } from "./support.ts";

/**
 * Telling a refusal the period's spend causes (it lasts until the next period) from one that
 * only other calls' live holds cause (temporary: `Grant.heldByOthersMs`), in the same atomic step
 * as the refusal, for `extendReservation` and for `chargeRateLimit` with `reserve`.
 */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("refusals held by others", () => {
    it("says a refusal is temporary when only other holds are in the way, with the wait for the soonest", async () => {
      const { grant, extend, settle } = await withAccount(makeStore, 1_000);
      expect(await extend("a", 1, 600)).toBe(600);
      expect(await extend("b", 1, 300, { nowMs: NOW + 1_000 })).toBe(300);
      // 1,000 left without holds covers 200; the holds leave 100. "a" expires first.
      expect(await grant("c", 200, 500, { nowMs: NOW + 2_000 })).toEqual({ granted: 0, heldByOthersMs: TTL - 2_000 });
      // Once "a" expired, the same ask is granted what is left.
      expect(await grant("c", 200, 500, { nowMs: NOW + TTL })).toEqual({ granted: 500 });
      await settle("b", 300);
      // The spend leaves 700, of which the hold of "c" takes 500: 300 would fit but for it.
      expect(await grant("d", 300, 300, { nowMs: NOW + TTL })).toEqual({
        granted: 0,
        heldByOthersMs: TTL,
      });
    });

    it("says nothing when the spend alone leaves too little, holds or not", async () => {
      const { grant, extend, settle } = await withAccount(makeStore, 1_000);
      expect(await extend("a", 1, 700)).toBe(700);
      await settle("a", 700);
      expect(await grant("b", 400, 400)).toEqual({ granted: 0 });
      expect(await extend("c", 1, 200)).toBe(200);
      // 300 left by the spend: too little for 400 even with the hold of "c" gone.
      expect(await grant("d", 400, 400)).toEqual({ granted: 0 });
      // Refused for a maximum below the minimum is not the holds' doing either.
      expect(await grant("e", 150, 100)).toEqual({ granted: 0 });
    });

    it("counts the call's own hold as its own when it grows, and measures the wait to another's", async () => {
      const { grant, extend } = await withAccount(makeStore, 1_000);
      expect(await extend("own", 1, 800)).toBe(800);
      expect(await extend("other", 1, 200, { nowMs: NOW + 1_000 })).toBe(200);
      // "own" expires sooner, but it is the caller's: the wait is for "other".
      expect(await grant("own", 100, 100, { nowMs: NOW + 2_000 })).toEqual({
        granted: 0,
        heldByOthersMs: TTL - 1_000,
      });
      // Asking for more than the spend leaves beside its own hold is not temporary.
      expect(await grant("own", 300, 300, { nowMs: NOW + 2_000 })).toEqual({ granted: 0 });
    });

    it("says nothing for a call whose own hold alone takes the cap, a closed id or a renewal", async () => {
      const { grant, extend, release } = await withAccount(makeStore, 1_000);
      expect(await extend("all", 1, 1_000)).toBe(1_000);
      expect(await grant("all", 1, 10)).toEqual({ granted: 0 });
      await release("all");
      // The cap is free again, but a released id is never granted anything.
      expect(await grant("all", 1, 10)).toEqual({ granted: 0 });
      expect(await extend("live", 1, 500)).toBe(500);
      expect(await grant("live", 0, 0)).toEqual({ granted: 0 });
    });

    it("answers the same in the admission step, and nothing for a request the rate limit refused", async () => {
      const { store, acc, reserve, extend } = await withAccount(makeStore, 1_000);
      const key = { id: "k-held", accountId: acc.id, rateLimitRps: 1, burst: 1 };
      expect(await extend("holder", 1, 950)).toBe(950);
      const held = await store.chargeRateLimit({ key, nowMs: NOW + 500, reserve: reserve("r1", 100, 900) });
      expect(held).toMatchObject({ allowed: true, granted: 0, heldByOthersMs: TTL - 500 });
      const limited = await store.chargeRateLimit({ key, nowMs: NOW + 500, reserve: reserve("r2", 100, 900) });
      expect(limited).toMatchObject({ allowed: false, granted: 0 });
      expect(limited.heldByOthersMs).toBeUndefined();
      const spent = await store.chargeRateLimit({ key, nowMs: NOW + 1_500, reserve: reserve("r3", 1_001, 1_001) });
      expect(spent).toMatchObject({ allowed: true, granted: 0 });
      expect(spent.heldByOthersMs).toBeUndefined();
    });
  });
});
