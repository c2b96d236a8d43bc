import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { PaymentStatus, SubscriptionStatus } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { UpdateAccountRequest } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { ADMIN, createCoreFixture } from "../testing/core-fixture.ts";
import { expectFailure } from "../testing/expect-failure.ts";
import { standingReasonOf } from "./account-standing.ts";

type Change = Omit<Partial<UpdateAccountRequest>, "$typeName" | "accountId">;

/** Each standing, the change that makes it, and the reason calls are refused with ("" = none). */
const STANDINGS: Array<[string, { cap?: null; change: Change }, string]> = [
  ["in good standing", { change: {} }, ""],
  ["not onboarded", { change: { onboardingComplete: false } }, "onboarding_incomplete"],
  ["without a cap", { cap: null, change: {} }, "onboarding_incomplete"],
  ["with a failed payment", { change: { paymentStatus: PaymentStatus.FAILED } }, "payment_failed"],
  ["canceled", { change: { subscriptionStatus: SubscriptionStatus.CANCELED } }, "subscription_canceled"],
  [
    "failed and canceled",
    { change: { paymentStatus: PaymentStatus.FAILED, subscriptionStatus: SubscriptionStatus.CANCELED } },
    "payment_failed",
  ],
  [
    "not onboarded and failed",
    { change: { onboardingComplete: false, paymentStatus: PaymentStatus.FAILED } },
    "onboarding_incomplete",
  ],
];

describe("account standing", () => {
  it.each(STANDINGS)("GetBalance reports the reason a chat call is refused with: %s", async (_name, setup, reason) => {
    const { admin, billing, completion, newAccount } = createCoreFixture();
    const { accountId, call } = await newAccount({ ...(setup.cap === null && { capUsdMicros: null }), burst: 100 });
    await admin.updateAccount({ accountId, ...setup.change }, ADMIN);
    expect((await billing.getBalance({}, call)).standingReason).toBe(reason);
    const chat = () => completion.createChatCompletion({ params: { prompt: "hi" } }, call);
    if (reason === "") expect((await chat()).choices).toHaveLength(1);
    else await expectFailure(chat, Code.FailedPrecondition, reason);
  });

  it("is one rule, checked in the order calls meet it", () => {
    const ok = {
      id: "a",
      onboardingComplete: true,
      spendCapUsdMicros: 1,
      paymentStatus: "ok",
      subscriptionStatus: "active",
      createTimeMs: 0,
    } as const;
    expect(standingReasonOf(ok)).toBeUndefined();
    expect(standingReasonOf({ ...ok, spendCapUsdMicros: undefined })).toBe("onboarding_incomplete");
    expect(standingReasonOf({ ...ok, paymentStatus: "failed", subscriptionStatus: "canceled" })).toBe("payment_failed");
    expect(standingReasonOf({ ...ok, subscriptionStatus: "canceled" })).toBe("subscription_canceled");
  });
});
