import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { PaymentStatus, SubscriptionStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { ChatParamsSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { reasonOf } from "../../errors/catalogue.ts";
import { createMemoryStore } from "../../store/memory/index.ts";
import type { Store } from "../../store/store.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { backends, manualGate, steeredEngine } from "../../testing/call-lifecycle.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

type Params = MessageInitShape<typeof ChatParamsSchema>;

const NOW = Date.UTC(2026, 10, 11, 12, 0, 0);
const P = 7; // prompt tokens of one user message "hi"
const hi: Params = { messages: [{ role: "user", content: "hi" }] };
/** service-extract's prices: 1 micro per input token, 2 per output token. */
const cost = (prompt: number, completion: number) => prompt + 2 * completion;

/** Wraps a store and records the name and argument of every method called on it. */
function recording(inner: Store): { store: Store; calls: Array<{ method: string; arg: unknown }> } {
  const calls: Array<{ method: string; arg: unknown }> = [];
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push({ method: String(prop), arg: args[0] });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls };
}

/** A core on `store` whose one model waits at `gate` before answering `tokens`, and an account with `cap`. */
async function setup(store: Store, cap: bigint | null = 10_000_000n, gate?: Promise<void>, tokens = 3) {
  const steered = steeredEngine(tokens, gate);
  const fixture = createCoreFixture({ store, engine: steered.engine, now: () => NOW });
  const key = await fixture.newAccount({ capUsdMicros: cap, burst: 1_000, rateLimitRps: 1_000 });
  const balance = async () => {
    const b = await fixture.billing.getBalance({}, key.call);
    return { spent: Number(b.spentUsdMicros), reserved: Number(b.reservedUsdMicros) };
  };
  const records = async () => (await fixture.billing.listUsageRecords({}, key.call)).usageRecords.length;
  const estimate = (params: Params) => fixture.billing.estimateChatCompletion({ params }, key.call);
  /** The reason a real unary call with `params` is refused with, or "" when it is answered. */
  const callReason = (params: Params) =>
    fixture.completion.createChatCompletion({ params }, key.call).then(
      () => "",
      (err: unknown) => reasonOf(err) ?? String(err),
    );
  return { ...fixture, ...steered, key, balance, records, estimate, callReason };
}

describe.each(backends)("EstimateChatCompletion on the %s store", (_name, makeStore) => {
  it("prices a call at exactly the hold the call then takes, and holds nothing itself", async () => {
    const gate = manualGate();
    const t = await setup(await makeStore(), 10_000_000n, gate.arrived);
    const params: Params = { ...hi, maxTokens: 100n, n: 2 };
    const before = await t.estimate(params);
    expect(before).toMatchObject({
      model: "service-extract",
      promptTokens: BigInt(P),
      maxOutputTokens: 200n,
      worstCaseCostUsdMicros: BigInt(cost(P, 200)),
      accountBudgetLeftUsdMicros: 10_000_000n,
      admitted: true,
      refusalReason: "",
    });
    expect(before.keyBudgetLeftUsdMicros).toBeUndefined();
    expect(await t.balance()).toEqual({ spent: 0, reserved: 0 });

    // A real call with the same parameters, held open by its engine: its hold is the estimate.
    const running = t.completion.createChatCompletion({ params }, t.key.call);
    await t.started;
    expect(await t.balance()).toEqual({ spent: 0, reserved: Number(before.worstCaseCostUsdMicros) });
    const during = await t.estimate(params);
    expect(during.accountBudgetLeftUsdMicros).toBe(10_000_000n - BigInt(cost(P, 200)));
    expect(await t.balance()).toEqual({ spent: 0, reserved: cost(P, 200) });
    gate.open();
    const answered = await running;
    expect(answered.usage?.promptTokens).toBe(before.promptTokens);
    expect(await t.core.calls.drain(10_000)).toBe(true);
    expect(await t.balance()).toEqual({ spent: cost(P, 3), reserved: 0 });
    expect(await t.records()).toBe(1);
  });

  it("refuses for the spend cap exactly where a call is refused: the prompt plus one output token", async () => {
    for (const [cap, admitted] of [
      [cost(P, 1), true],
      [cost(P, 1) - 1, false],
    ] as const) {
      // The call answers one token: admitted, it completes within the cap.
      const t = await setup(await makeStore(), BigInt(cap), undefined, 1);
      const estimate = await t.estimate({ ...hi, maxTokens: 1n });
      expect(estimate).toMatchObject({
        admitted,
        refusalReason: admitted ? "" : "spend_cap_exceeded",
        accountBudgetLeftUsdMicros: BigInt(cap),
        worstCaseCostUsdMicros: BigInt(cost(P, 1)),
      });
      expect(await t.callReason({ ...hi, maxTokens: 1n })).toBe(estimate.refusalReason);
    }
  });
});

describe("EstimateChatCompletion", () => {
  it("reads the account and the balance, and charges only the rate limit: no hold, spend or record", async () => {
    const { store, calls } = recording(createMemoryStore());
    const t = await setup(store);
    await t.callReason(hi);
    const ledger = { balance: await t.balance(), records: await t.records() };
    calls.length = 0;
    for (const params of [hi, { ...hi, model: "nope" }, { ...hi, maxTokens: 5n, n: 8 }]) await t.estimate(params);
    expect(new Set(calls.map((c) => c.method))).toEqual(
      new Set(["findApiKeyByHash", "chargeRateLimit", "getAccount", "balance"]),
    );
    expect(calls.filter((c) => c.method === "chargeRateLimit").map((c) => c.arg)).toEqual([
      expect.not.objectContaining({ reserve: expect.anything() }),
      expect.not.objectContaining({ reserve: expect.anything() }),
      expect.not.objectContaining({ reserve: expect.anything() }),
    ]);
    expect({ balance: await t.balance(), records: await t.records() }).toEqual(ledger);
  });

  it("refuses in the call's order: standing, then model, then input size, then the cap", async () => {
    const huge = { messages: [{ role: "user", content: "many words ".repeat(40_000) }] };
    const t = await setup(createMemoryStore(), 1n);
    const { accountId } = t.key;
    const update = (patch: { paymentStatus?: PaymentStatus; subscriptionStatus?: SubscriptionStatus }) =>
      t.admin.updateAccount({ accountId, ...patch }, ADMIN);
    const cases: Array<[string, Params]> = [
      ["spend_cap_exceeded", hi],
      ["input_too_large", huge],
      ["model_not_found", { ...huge, model: "nope" }],
    ];
    for (const [reason, params] of cases) {
      expect((await t.estimate(params)).refusalReason, reason).toBe(reason);
      expect(await t.callReason(params)).toBe(reason);
    }
    await update({ subscriptionStatus: SubscriptionStatus.CANCELED });
    expect((await t.estimate({ ...huge, model: "nope" })).refusalReason).toBe("subscription_canceled");
    await update({ paymentStatus: PaymentStatus.FAILED });
    const refused = await t.estimate(hi);
    // Refused for standing, it is still sized: the holder sees what it would cost.
    expect(refused).toMatchObject({ admitted: false, refusalReason: "payment_failed", promptTokens: BigInt(P) });
    expect(await t.callReason(hi)).toBe("payment_failed");

    const unsized = await t.estimate({ ...hi, model: "nope" });
    expect(unsized).toMatchObject({ model: "nope", admitted: false, refusalReason: "payment_failed" });
    expect([unsized.promptTokens, unsized.maxOutputTokens, unsized.worstCaseCostUsdMicros]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    const tooLarge = await t.estimate(huge);
    expect(tooLarge.promptTokens).toBeUndefined();
  });

  it("leaves the budget unset while onboarding is incomplete", async () => {
    const t = await setup(createMemoryStore(), null);
    const estimate = await t.estimate(hi);
    expect(estimate).toMatchObject({ admitted: false, refusalReason: "onboarding_incomplete" });
    expect(estimate.accountBudgetLeftUsdMicros).toBeUndefined();
    expect(await t.callReason(hi)).toBe("onboarding_incomplete");
  });

  it("fails invalid parameters as a call does, and charges the rate limit like any Billing RPC", async () => {
    const t = await setup(createMemoryStore());
    for (const params of [{}, { ...hi, temperature: 3 }, { ...hi, n: 9 }]) {
      await expectFailure(() => t.estimate(params), Code.InvalidArgument, "invalid_request_body");
      expect(await t.callReason(params)).toBe("invalid_request_body");
    }
    const limited = await t.newKey(t.key.accountId, { rateLimitRps: 0.001, burst: 1 });
    const once = () => t.billing.estimateChatCompletion({ params: hi }, limited.call);
    expect((await once()).admitted).toBe(true);
    await expectFailure(once, Code.ResourceExhausted, "api_key_rate_limited");
  });
});
