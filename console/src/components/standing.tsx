/**
 * The account's standing, from `GetBalance.standingReason`: the reason chat calls are refused now, in words,
 * with who fixes it. The page judges nothing; the reason is the core's.
 */

/** What each standing reason means for the holder; the call estimate words its refusals with it too. */
export const STANDING_MEANINGS: Record<string, string> = {
  onboarding_incomplete:
    "Onboarding is not finished or no spend cap is set, so chat calls are refused (402 onboarding_incomplete).",
  payment_failed: "The last invoice failed to charge, so chat calls are refused (402 payment_failed).",
  subscription_canceled: "The subscription is cancelled, so chat calls are refused (402 subscription_canceled).",
};

/** "In good standing" when the reason is empty, else an explanation and who to ask. */
export function Standing({ reason }: { reason: string }) {
  if (reason === "") {
    return (
      <p class="standing ok" data-standing="ok">
        <strong>In good standing:</strong> chat calls with your keys may run.
      </p>
    );
  }
  return (
    <div class="standing blocked" data-standing={reason}>
      <p>
        <strong>Calls are blocked.</strong> {STANDING_MEANINGS[reason] ?? `Chat calls are refused (${reason}).`}
      </p>
      <p>Your operator fixes this on the account; there is nothing to change on your side.</p>
    </div>
  );
}
