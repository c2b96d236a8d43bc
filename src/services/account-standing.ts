import type { Reason } from "../errors/catalogue.ts";
import type { AccountRecord } from "../store/store.ts";

/** The catalogue reasons an account's standing refuses chat calls with. */
export type StandingReason = Extract<Reason, "onboarding_incomplete" | "payment_failed" | "subscription_canceled">;

/**
 * Why a chat call of this account would be refused for its standing now (DESIGN step 6), or
 * undefined when calls may run. It is the one rule: the chat plan refuses calls by it, and
 * Billing's GetBalance reports it, so that what a console shows can never disagree with what
 * calls get. The first failing check wins, in the order calls meet them.
 */
export function standingReasonOf(account: AccountRecord): StandingReason | undefined {
  if (!account.onboardingComplete || account.spendCapUsdMicros === undefined) return "onboarding_incomplete";
  if (account.paymentStatus === "failed") return "payment_failed";
  if (account.subscriptionStatus === "canceled") return "subscription_canceled";
  return undefined;
}
