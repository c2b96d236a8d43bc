import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RetryInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { PaymentStatus, SubscriptionStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { ChatParamsSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine } from "../../engines/engine.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { drain } from "../../testing/drain.ts";
import { countingEngine, modelsServing } from "../../testing/engines.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/**
 * The calls CompletionService refuses, and in which order it checks: the account's status, the
 * model, the input size and the spend cap (its period included). Its answers are in
 * index.test.ts.
 */

/** Mid-month, so that the next UTC period starts in exactly 15.5 days. */
const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const MS_TO_NEXT_PERIOD = 15.5 * 86_400_000;
const tokenizer = createTokenizer();

type Params = MessageInitShape<typeof ChatParamsSchema>;
const hi: Params = { messages: [{ role: "user", content: "hi" }] };

/** A core over a memory store and a clock the test moves; models named in `free` cost nothing. */
function setup(engines: Record<string, Engine> = {}, free: string[] = []) {
  const clock = { now: NOW };
  const all: Record<string, Engine> = { "service-extract": countingEngine(5), ...engines };
  const models = modelsServing(
    Object.entries(all).map(([name, engine]) =>
      free.includes(name)
        ? { name, engine, inputUsdMicrosPerMillion: 0, outputUsdMicrosPerMillion: 0, free: true }
        : { name, engine },
    ),
  );
  const fixture = createCoreFixture({ models, tokenizer, now: () => clock.now });
  const newAccount = (opts: { cap?: bigint | null; onboarded?: boolean } = {}) =>
    fixture.newAccount({ capUsdMicros: opts.cap, onboarded: opts.onboarded, burst: 1_000 });
  return { clock, admin: fixture.admin, completion: fixture.completion, newAccount };
}

describe("CompletionService", () => {
  describe("account status", () => {
    it("refuses an account without a cap, or not onboarded, with onboarding_incomplete", async () => {
      const { completion, newAccount } = setup();
      for (const opts of [{ cap: null }, { onboarded: false }]) {
        const { call } = await newAccount(opts);
        await expectFailure(
          () => completion.createChatCompletion({ params: hi }, call),
          Code.FailedPrecondition,
          "onboarding_incomplete",
        );
        await expectFailure(
          () => drain(completion.streamChatCompletion({ params: hi }, call)),
          Code.FailedPrecondition,
          "onboarding_incomplete",
        );
      }
    });

    it("refuses a failed payment and a cancelled subscription", async () => {
      const { admin, completion, newAccount } = setup();
      const failed = await newAccount();
      await admin.updateAccount({ accountId: failed.accountId, paymentStatus: PaymentStatus.FAILED }, ADMIN);
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, failed.call),
        Code.FailedPrecondition,
        "payment_failed",
      );
      const canceled = await newAccount();
      await admin.updateAccount(
        { accountId: canceled.accountId, subscriptionStatus: SubscriptionStatus.CANCELED },
        ADMIN,
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, canceled.call),
        Code.FailedPrecondition,
        "subscription_canceled",
      );
      await admin.updateAccount(
        { accountId: canceled.accountId, subscriptionStatus: SubscriptionStatus.ACTIVE },
        ADMIN,
      );
      expect((await completion.createChatCompletion({ params: hi }, canceled.call)).choices[0]?.content).toBe("aaaaa");
    });
  });

  it("refuses an unknown model with model_not_found", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, model: "gpt-9" } }, call),
      Code.NotFound,
      "model_not_found",
    );
  });

  it("accepts exactly 32,768 input tokens and refuses one more with input_too_large", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const words = (n: number) => `hello${" hello".repeat(n - 1)}`;
    expect(tokenizer.countMessages([{ role: "user", content: words(32_762) }], 1e9)).toBe(32_768);
    const ok = await completion.createChatCompletion(
      { params: { messages: [{ role: "user", content: words(32_762) }] } },
      call,
    );
    expect(ok.usage?.promptTokens).toBe(32_768n);
    const big: Params = { messages: [{ role: "user", content: words(32_763) }] };
    await expectFailure(
      () => completion.createChatCompletion({ params: big }, call),
      Code.InvalidArgument,
      "input_too_large",
    );
    await expectFailure(
      () => drain(completion.streamChatCompletion({ params: big }, call)),
      Code.InvalidArgument,
      "input_too_large",
    );
  });

  it("refuses a call the cap cannot admit with spend_cap_exceeded and the time to the next period", async () => {
    const { admin, completion, newAccount } = setup();
    // The prompt plus one output token costs 7 + 2 = 9 micros.
    const { accountId, call } = await newAccount({ cap: 8n });
    const err = await expectFailure(
      () => completion.createChatCompletion({ params: hi }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(err.findDetails(RetryInfoSchema)).toHaveLength(1);
    expect(retryAfterMsOf(err)).toBe(MS_TO_NEXT_PERIOD);
    const streamed = await expectFailure(
      () => drain(completion.streamChatCompletion({ params: hi }, call)),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(retryAfterMsOf(streamed)).toBe(MS_TO_NEXT_PERIOD);
    // Refused at admission: nothing was held or charged.
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
    const enough = await newAccount({ cap: 9n });
    expect(
      (await completion.createChatCompletion({ params: { ...hi, maxTokens: 1n } }, enough.call)).choices[0]?.content,
    ).toBe("a");
  });

  it("admits calls again once the UTC month rolls over", async () => {
    const { admin, clock, completion, newAccount } = setup();
    const { accountId, call } = await newAccount({ cap: 20n });
    await completion.createChatCompletion({ params: hi }, call);
    await expectFailure(
      () => completion.createChatCompletion({ params: hi }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    clock.now = Date.UTC(2026, 11, 1, 0, 0, 0);
    expect((await completion.createChatCompletion({ params: hi }, call)).choices[0]?.content).toBe("aaaaa");
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      period: "2026-12",
      spentUsdMicros: 17n,
      reservedUsdMicros: 0n,
    });
  });

  it("never lets a free model pass the cap: it needs budget left but charges nothing", async () => {
    const { admin, completion, newAccount } = setup({ gratis: countingEngine(3) }, ["gratis"]);
    const spentUp = await newAccount({ cap: 0n });
    await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, model: "gratis" } }, spentUp.call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    const { accountId, call } = await newAccount({ cap: 1n });
    expect(
      (await completion.createChatCompletion({ params: { ...hi, model: "gratis" } }, call)).choices[0]?.content,
    ).toBe("aaa");
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
  });

  describe("check order", () => {
    it("validates before it checks the account", async () => {
      const { completion, newAccount } = setup();
      const { call } = await newAccount({ onboarded: false });
      await expectFailure(
        () => completion.createChatCompletion({ params: {} }, call),
        Code.InvalidArgument,
        "invalid_request_body",
      );
    });

    it("checks the account before the model, the model before the size, the size before the cap", async () => {
      const { completion, newAccount } = setup();
      const big = `hello${" hello".repeat(40_000)}`;
      const notOnboarded = await newAccount({ onboarded: false });
      await expectFailure(
        () => completion.createChatCompletion({ params: { ...hi, model: "nope" } }, notOnboarded.call),
        Code.FailedPrecondition,
        "onboarding_incomplete",
      );
      const { call } = await newAccount({ cap: 0n });
      await expectFailure(
        () => completion.createChatCompletion({ params: { model: "nope", prompt: big } }, call),
        Code.NotFound,
        "model_not_found",
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: { prompt: big } }, call),
        Code.InvalidArgument,
        "input_too_large",
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, call),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
    });
  });
});
