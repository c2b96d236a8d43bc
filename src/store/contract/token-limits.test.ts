import { describe, expect, it } from "vitest";
import { withKeys } from "./key-support.ts";
import { contractBackends, NOW, PERIOD, TTL } from "./support.ts";

/**
 * A key's tokens-per-minute budget (GCRA in tokens): an admission takes the call's prompt plus its
 * reserved output in the same step as its request rate and its hold, a settle gives back what the
 * call did not use and a release all of it, never more than the budget still counts. 600 tokens
 * per minute is 100 ms per token, so every number below is exact on both stores.
 */
const TPM = 600;

describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("token limits", () => {
    /** Keys "t" (600 tokens per minute), "u" (the same) and "plain", and t's budget as the admission reads it. */
    const setup = async () => {
      const keys = await withKeys(makeStore, 1_000_000, {
        t: { tokensPerMinute: TPM },
        u: { tokensPerMinute: TPM },
        plain: {},
      });
      const budget = async (nowMs = NOW) => {
        const r = await keys.store.chargeRateLimit({ key: keys.keyOf("t"), nowMs, tokens: 0 });
        return r.tokens;
      };
      return { ...keys, budget };
    };

    it("takes the call's tokens with its hold, and refuses a call the budget cannot cover yet", async () => {
      const { admit, balance, budget } = await setup();
      const first = await admit("a", "t", 1, 100, 400);
      expect(first).toMatchObject({ allowed: true, granted: 100 });
      expect(first.tokens).toEqual({ allowed: true, limit: TPM, remaining: 200, resetMs: 40_000, retryAfterMs: 0 });
      // 300 more: 100 tokens short, so 10 s (100 ms each) to wait; nothing is held.
      const refused = await admit("b", "t", 1, 100, 300);
      expect(refused).toMatchObject({ allowed: true, granted: 0 });
      expect(refused.tokens).toEqual({
        allowed: false,
        limit: TPM,
        remaining: 200,
        resetMs: 40_000,
        retryAfterMs: 10_000,
      });
      expect(refused.heldByOthersMs).toBeUndefined();
      expect(await balance()).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 100 });
      expect(await budget()).toEqual({ allowed: true, limit: TPM, remaining: 200, resetMs: 40_000, retryAfterMs: 0 });
      expect((await admit("b", "t", 1, 100, 300, NOW + 10_000)).tokens?.allowed).toBe(true);
    });

    it("gives back what a settled call did not use, and all of a released call's take", async () => {
      const { admit, settle, release, budget } = await setup();
      expect((await admit("s", "t", 1, 100, 300)).tokens?.remaining).toBe(300);
      expect((await admit("r", "t", 1, 100, 200)).tokens?.remaining).toBe(100);
      expect(await settle("s", "t", 50, { usedTokens: 120 })).toBe("settled");
      expect((await budget())?.remaining).toBe(280);
      expect(await release("r", "t")).toBe("released");
      expect((await budget())?.remaining).toBe(480);
      // Once closed, the ids give nothing back again.
      expect(await release("r", "t")).toBe("released");
      expect(await release("s", "t")).toBe("settled");
      expect(await settle("s", "t", 50, { usedTokens: 0 })).toBe("settled");
      expect((await budget())?.remaining).toBe(480);
    });

    it("gives nothing back that the budget no longer counts: no credit past a refill", async () => {
      const { admit, grant, release, budget } = await setup();
      expect((await admit("old", "t", 1, 100, 300)).tokens?.remaining).toBe(300);
      // Its call keeps its hold alive past the refill.
      expect((await grant("old", "t", 0, 0, NOW + 25_000)).granted).toBe(0);
      // 40 s later the budget is full again; a new call takes all of it.
      expect((await admit("new", "t", 1, 100, TPM, NOW + 40_000)).tokens?.remaining).toBe(0);
      // The old call's end would give 300 back, but its take was forgotten when the budget refilled.
      expect(await release("old", "t", NOW + 41_000)).toBe("released");
      expect((await budget(NOW + 41_000))?.remaining).toBe(10);
    });

    it("takes no tokens for a call the cap refuses, and reads the budget on a refused request", async () => {
      const { store, acc, keyOf, budget } = await setup();
      await store.updateAccount({ accountId: acc.id, patch: { spendCapUsdMicros: 0 } });
      const capped = await store.chargeRateLimit({
        key: keyOf("t"),
        nowMs: NOW,
        tokens: 500,
        reserve: { accountId: acc.id, period: PERIOD, reservationId: "c", minimum: 1, maximum: 10, ttlMs: TTL },
      });
      expect(capped).toMatchObject({ allowed: true, granted: 0 });
      expect(capped.tokens).toEqual({ allowed: true, limit: TPM, remaining: TPM, resetMs: 0, retryAfterMs: 0 });
      expect(await budget()).toEqual({ allowed: true, limit: TPM, remaining: TPM, resetMs: 0, retryAfterMs: 0 });
      const slow = { ...keyOf("t"), rateLimitRps: 1, burst: 1 };
      expect((await store.chargeRateLimit({ key: slow, nowMs: NOW + 1, tokens: 0 })).allowed).toBe(true);
      const limited = await store.chargeRateLimit({ key: slow, nowMs: NOW + 2, tokens: 100 });
      expect(limited).toMatchObject({ allowed: false, tokens: { allowed: true, remaining: TPM } });
    });

    it("lets a call bigger than a minute's budget take the whole budget once it is full", async () => {
      const { admit } = await setup();
      expect((await admit("small", "t", 1, 10, 60)).tokens?.remaining).toBe(540);
      const big = await admit("big", "t", 1, 10, 5_000, NOW + 1_000);
      expect(big.tokens).toMatchObject({ allowed: false, remaining: 550, retryAfterMs: 5_000 });
      const later = await admit("big", "t", 1, 10, 5_000, NOW + 6_000);
      expect(later.tokens).toEqual({ allowed: true, limit: TPM, remaining: 0, resetMs: 60_000, retryAfterMs: 0 });
    });

    it("answers no budget for a key without a token limit, or for a request that is no chat call", async () => {
      const { store, keyOf, admit } = await setup();
      expect((await admit("p", "plain", 1, 10, 1_000_000)).tokens).toBeUndefined();
      expect((await admit("p2", "plain", 1, 10, 1_000_000)).granted).toBe(10);
      expect((await store.chargeRateLimit({ key: keyOf("t"), nowMs: NOW })).tokens).toBeUndefined();
    });

    it("keeps one budget per key, and renewals and extensions do not touch it", async () => {
      const { admit, grant, budget } = await setup();
      expect((await admit("x", "t", 1, 10, 500)).tokens?.remaining).toBe(100);
      expect((await admit("y", "u", 1, 10, 500)).tokens?.remaining).toBe(100);
      expect((await grant("x", "t", 1, 100)).granted).toBe(100);
      expect((await grant("x", "t", 0, 0)).granted).toBe(0);
      expect((await budget())?.remaining).toBe(100);
    });
  });
});
