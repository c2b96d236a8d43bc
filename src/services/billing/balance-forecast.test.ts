import { describe, expect, it } from "vitest";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { countingEngine } from "../../testing/engines.ts";

const hi = { messages: [{ role: "user", content: "hi" }] };
/** One call of `hi` answered in 5 tokens: 7 prompt tokens at 1 micro, 5 output tokens at 2. */
const CALL_COST = 17;

/** A core whose clock the test sets, and an account with `cap`. */
async function setup(cap: bigint | null) {
  const clock = { now: Date.parse("2026-11-11T12:00:00Z") }; // 10.5 days into November
  const fixture = createCoreFixture({ engine: countingEngine(5), now: () => clock.now });
  const { call } = await fixture.newAccount({ capUsdMicros: cap });
  const balance = () => fixture.billing.getBalance({}, call);
  const spend = () => fixture.completion.createChatCompletion({ params: hi }, call);
  return { clock, balance, spend };
}

describe("GetBalance's forecast", () => {
  it("has a rate of 0 and no date before anything is spent", async () => {
    const t = await setup(30n);
    const b = await t.balance();
    expect(b.burnRateUsdMicrosPerDay).toBe(0n);
    expect(b.capReachedDate).toBeUndefined();
  });

  it("projects the period's spend to the day it reaches the cap, and follows the clock", async () => {
    const t = await setup(30n);
    await t.spend();
    expect(await t.balance()).toMatchObject({
      spentUsdMicros: BigInt(CALL_COST),
      // 17 over 10.5 days, rounded down.
      burnRateUsdMicrosPerDay: 1n,
      // The 13 left take 13 * 10.5 / 17 = 8.03 days more: the 19th.
      capReachedDate: "2026-11-19",
    });
    // Ten days later the same spend is slower: the cap is not reached in November.
    t.clock.now = Date.parse("2026-11-21T12:00:00Z");
    const later = await t.balance();
    expect(later.burnRateUsdMicrosPerDay).toBe(0n);
    expect(later.capReachedDate).toBeUndefined();
  });

  it("says today once the cap is reached, and gives no date without a cap", async () => {
    const capped = await setup(BigInt(CALL_COST));
    await capped.spend();
    expect((await capped.balance()).capReachedDate).toBe("2026-11-11");
    const uncapped = await setup(null);
    expect(await uncapped.balance()).toMatchObject({
      burnRateUsdMicrosPerDay: 0n,
      standingReason: "onboarding_incomplete",
    });
    expect((await uncapped.balance()).capReachedDate).toBeUndefined();
  });
});
