import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ADMIN, createCoreFixture } from "../testing/core-fixture.ts";
import { drain } from "../testing/drain.ts";
import { countingEngine, modelsServing } from "../testing/engines.ts";
import { expectFailure } from "../testing/expect-failure.ts";
import { generateApiKey } from "./auth/api-key.ts";

/** 7 prompt tokens ("hi") and 5 output tokens of service-extract: 7 + 5 * 2 micros. */
const CALL_COST = 17;
const hi = { messages: [{ role: "user", content: "hi" }] };
const at = (day: number, hour = 12) => Date.UTC(2026, 10, day, hour, 0, 0);

function setup() {
  const clock = { now: at(3) };
  const models = modelsServing([
    { name: "service-extract", engine: countingEngine(5) },
    { name: "long", engine: countingEngine(20) },
  ]);
  const fixture = createCoreFixture({ models, now: () => clock.now });
  /** Both views of an account's chart, as plain values to compare (their messages differ by package). */
  const charts = async (accountId: string, call: { headers: { authorization: string } }) =>
    [await fixture.billing.getSpendByDay({}, call), await fixture.admin.getSpendByDay({ accountId }, ADMIN)].map(
      (r) => ({
        period: r.period,
        days: r.days.map((d) => [d.date, Number(d.spentUsdMicros)]),
        cap: r.spendCapUsdMicros,
        spent: Number(r.spentUsdMicros),
        reserved: Number(r.reservedUsdMicros),
      }),
    );
  return { clock, charts, ...fixture };
}

const november = (day: number) => `2026-11-${String(day).padStart(2, "0")}`;

describe("GetSpendByDay (Billing and Admin)", () => {
  it("charts every day from the 1st to today, each call on its own day, the same for both services", async () => {
    const { clock, charts, completion, newAccount } = setup();
    const { accountId, call } = await newAccount({ capUsdMicros: 5_000_000n, burst: 100 });
    await completion.createChatCompletion({ params: hi }, call);
    clock.now = at(5, 9);
    await completion.createChatCompletion({ params: hi }, call);
    clock.now = at(5, 23);
    await completion.createChatCompletion({ params: hi }, call);
    clock.now = at(6, 8);

    const [billing, admin] = await charts(accountId, call);
    expect(billing).toEqual({
      period: "2026-11",
      days: [1, 2, 3, 4, 5, 6].map((d) => [november(d), { 3: CALL_COST, 5: 2 * CALL_COST }[d] ?? 0]),
      cap: 5_000_000n,
      spent: 3 * CALL_COST,
      reserved: 0,
    });
    expect(admin).toEqual(billing);
  });

  it("shows one day on the 1st, and counts a stream cut by the cap on its day", async () => {
    const { clock, charts, completion, newAccount } = setup();
    clock.now = at(1, 0);
    // The cap admits the call but covers only 5 of its 20 output tokens: 7 + 5 * 2 = 17.
    const { accountId, call } = await newAccount({ capUsdMicros: BigInt(CALL_COST + 1), burst: 100 });
    await expectFailure(
      () => drain(completion.streamChatCompletion({ params: { ...hi, model: "long", maxTokens: 100n } }, call)),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    const [chart] = await charts(accountId, call);
    expect(chart?.days).toEqual([[november(1), CALL_COST]]);
    expect(chart?.spent).toBe(CALL_COST);
  });

  it("answers an account without a cap, or without spend, with zeros", async () => {
    const { clock, charts, newAccount } = setup();
    clock.now = at(30, 23);
    const { accountId, call } = await newAccount({ capUsdMicros: null, onboarded: false });
    const [chart] = await charts(accountId, call);
    expect(chart?.cap).toBeUndefined();
    expect(chart?.days).toEqual(Array.from({ length: 30 }, (_, i) => [november(i + 1), 0]));
    expect(chart?.spent).toBe(0);
  });

  it("refuses a bad key (Billing) and a missing or malformed account (Admin)", async () => {
    const { admin, billing } = setup();
    await expectFailure(() => billing.getSpendByDay({}), Code.Unauthenticated, "missing_bearer_token");
    await expectFailure(
      () => billing.getSpendByDay({}, { headers: { authorization: `Bearer ${generateApiKey()}` } }),
      Code.Unauthenticated,
      "invalid_api_key",
    );
    await expectFailure(
      () => admin.getSpendByDay({ accountId: randomUUID() }, ADMIN),
      Code.NotFound,
      "account_not_found",
    );
    await expectFailure(
      () => admin.getSpendByDay({ accountId: "not-a-uuid" }, ADMIN),
      Code.InvalidArgument,
      "invalid_argument",
    );
    await expectFailure(
      () => admin.getSpendByDay({ accountId: randomUUID() }),
      Code.Unauthenticated,
      "invalid_admin_token",
    );
  });
});
