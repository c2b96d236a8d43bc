import { describe, expect, it } from "vitest";
import { alertReader, PERCENTS, shapeOf } from "./alert-support.ts";
import { withKeys } from "./key-support.ts";
import { contractBackends, NOW, PERIOD } from "./support.ts";

/**
 * Spend alerts: the settle that moves a spend past a threshold of its cap raises the alert in the
 * same atomic step (one script in the account's slot on Redis and Redis Cluster), exactly once per
 * threshold, period and scope (the account, and each key with a cap of its own), and the alert is
 * in the webhook queue when the settle returns.
 */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  /** An account (cap `accountCap`) with keys a (own cap 200) and b (none), and a settle that asks for alerts. */
  async function setup(accountCap = 1_000) {
    const base = await withKeys(makeStore, accountCap, { a: { spendCapUsdMicros: 200 }, b: {} });
    const { store, acc, keyOf } = base;
    let n = 0;
    const settle = (charge: number, key = "b", extra: { period?: string; nowMs?: number; percents?: number[] } = {}) =>
      store.settle({
        accountId: acc.id,
        period: extra.period ?? PERIOD,
        reservationId: `call-${++n}`,
        apiKeyId: keyOf(key).id,
        chargeUsdMicros: charge,
        nowMs: extra.nowMs ?? NOW,
        alertPercents: extra.percents ?? PERCENTS,
      });
    const reader = await alertReader(store);
    return { ...base, settle, ...reader };
  }
  const account = (percent: number, cap: number, spent: number, period = PERIOD) => ({
    scope: "account",
    period,
    percent,
    cap,
    spent,
  });

  describe("spend alerts", () => {
    it("raises each threshold once, at the settle whose spend first reaches it", async () => {
      const { settle, raised } = await setup();
      await settle(400);
      expect(await raised()).toEqual([]);
      await settle(100);
      expect((await raised()).map(shapeOf)).toEqual([account(50, 1_000, 500)]);
      await settle(100);
      expect(await raised()).toEqual([]);
      await settle(250);
      expect((await raised()).map(shapeOf)).toEqual([account(80, 1_000, 850)]);
      // 100 % is reached exactly at the cap (a charge is never cut below it here).
      await settle(150);
      const [full] = await raised();
      expect(full && shapeOf(full)).toEqual(account(100, 1_000, 1_000));
      expect(full?.timeMs).toBe(NOW);
      await settle(10);
      expect(await raised()).toEqual([]);
    });

    it("raises every threshold a settle jumps over, each once, with the spend it reached", async () => {
      const { settle, raised } = await setup();
      await settle(1_000);
      const alerts = await raised();
      expect(alerts.map(shapeOf)).toEqual([
        account(50, 1_000, 1_000),
        account(80, 1_000, 1_000),
        account(100, 1_000, 1_000),
      ]);
      expect(new Set(alerts.map((a) => a.id)).size).toBe(3);
      await settle(0);
      expect(await raised()).toEqual([]);
    });

    it("raises a key's thresholds on its own cap, apart from the account's; a key without a cap has none", async () => {
      const { settle, raised, keyOf, acc } = await setup(10_000);
      const a = keyOf("a").id;
      await settle(100, "a");
      const [half] = await raised();
      expect(half && shapeOf(half)).toEqual({
        scope: "key",
        apiKeyId: a,
        period: PERIOD,
        percent: 50,
        cap: 200,
        spent: 100,
      });
      expect(half?.accountId).toBe(acc.id);
      // Past the key's cap the charge is cut at it: 80 and 100 in one settle.
      await settle(500, "a");
      expect((await raised()).map((x) => [x.scope, x.thresholdPercent, x.spentUsdMicros])).toEqual([
        ["key", 80, 200],
        ["key", 100, 200],
      ]);
      await settle(5_000, "b");
      expect((await raised()).map((x) => [x.scope, x.thresholdPercent, x.spentUsdMicros])).toEqual([
        ["account", 50, 5_200],
      ]);
    });

    it("raises them again in a new period, and only there", async () => {
      const { settle, raised } = await setup();
      await settle(600);
      expect((await raised()).map((a) => a.thresholdPercent)).toEqual([50]);
      await settle(600, "b", { period: "2026-12" });
      expect((await raised()).map(shapeOf)).toEqual([account(50, 1_000, 600, "2026-12")]);
      await settle(200);
      expect((await raised()).map((a) => [a.period, a.thresholdPercent])).toEqual([[PERIOD, 80]]);
    });

    it("reads the cap at each settle: a raise re-arms nothing, a lowering fires what the spend is past", async () => {
      const { settle, raised, store, acc } = await setup();
      await settle(600);
      expect((await raised()).map((a) => a.thresholdPercent)).toEqual([50]);
      await store.updateAccount({ accountId: acc.id, patch: { spendCapUsdMicros: 2_000 } });
      await settle(500); // 1,100 of 2,000: past 50 % again, which fired this period already
      expect(await raised()).toEqual([]);
      await settle(500); // 1,600 of 2,000
      expect((await raised()).map(shapeOf)).toEqual([account(80, 2_000, 1_600)]);
      await store.updateAccount({ accountId: acc.id, patch: { spendCapUsdMicros: 1_000 } });
      // Nothing more can be charged, but the next settle (a hold taken before) reads the new cap.
      await settle(10);
      expect((await raised()).map(shapeOf)).toEqual([account(100, 1_000, 1_600)]);
    });

    it("raises nothing for a settle that asks for none; the next that asks reads the spend reached", async () => {
      const { settle, raised } = await setup();
      await settle(900, "b", { percents: [] });
      expect(await raised()).toEqual([]);
      await settle(0);
      expect((await raised()).map((a) => [a.thresholdPercent, a.spentUsdMicros])).toEqual([
        [50, 900],
        [80, 900],
      ]);
    });

    it("raises each threshold exactly once when 48 settles cross them at the same time", async () => {
      const { settle, raised, keyOf } = await setup();
      // Key a's 12 charges pass its cap of 200, the 36 of b bring the account past its 1,000.
      await Promise.all(Array.from({ length: 48 }, (_, i) => settle(25, i % 4 === 0 ? "a" : "b")));
      const alerts = await raised();
      expect(alerts.map((a) => [a.scope, a.thresholdPercent])).toEqual([
        ["account", 50],
        ["account", 80],
        ["account", 100],
        ["key", 50],
        ["key", 80],
        ["key", 100],
      ]);
      expect(alerts.filter((a) => a.scope === "key").every((a) => a.apiKeyId === keyOf("a").id)).toBe(true);
      expect(new Set(alerts.map((a) => a.id)).size).toBe(alerts.length);
      await settle(0, "a");
      expect(await raised()).toEqual([]);
    });
  });
});
