/**
 * The operator's edit form for an account (`AdminService.UpdateAccount`): cap, onboarding, payment status
 * and subscription status. Only the fields changed are sent, since the RPC leaves unset fields alone.
 */
import { useState } from "preact/hooks";
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  type Account,
  PaymentStatus,
  SubscriptionStatus,
  type UpdateAccountRequestSchema,
} from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { admin } from "../api.ts";
import { formatInputUsd, parseUsd } from "../money.ts";
import { ErrorAlert } from "./feedback.tsx";

/** Payment statuses in words; the unset value shows only on accounts that still have it. */
const PAYMENT: readonly [PaymentStatus, string][] = [
  [PaymentStatus.UNSPECIFIED, "Not set (treated as OK)"],
  [PaymentStatus.OK, "OK: the last invoice was charged"],
  [PaymentStatus.FAILED, "Failed: calls get 402 payment_failed"],
];

/** Subscription statuses in words. */
const SUBSCRIPTION: readonly [SubscriptionStatus, string][] = [
  [SubscriptionStatus.UNSPECIFIED, "Not set (treated as active)"],
  [SubscriptionStatus.ACTIVE, "Active"],
  [SubscriptionStatus.CANCELED, "Canceled: calls get 402 subscription_canceled"],
];

/** The label of a payment status, for the account's details. */
export function paymentLabel(status: PaymentStatus): string {
  return PAYMENT.find(([s]) => s === status)?.[1] ?? `Unknown (${status})`;
}

/** The label of a subscription status, for the account's details. */
export function subscriptionLabel(status: SubscriptionStatus): string {
  return SUBSCRIPTION.find(([s]) => s === status)?.[1] ?? `Unknown (${status})`;
}

/** The edit form; `onSaved` gets the account as stored after the update. */
export function AccountEditForm({ account, onSaved }: { account: Account; onSaved: (a: Account) => void }) {
  const [cap, setCap] = useState(
    account.spendCapUsdMicros === undefined ? "" : formatInputUsd(account.spendCapUsdMicros),
  );
  const [onboarded, setOnboarded] = useState(account.onboardingComplete);
  const [payment, setPayment] = useState<number>(account.paymentStatus);
  const [subscription, setSubscription] = useState<number>(account.subscriptionStatus);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [saved, setSaved] = useState("");
  const parsedCap = cap.trim() === "" ? undefined : parseUsd(cap);
  const capError = parsedCap && !parsedCap.ok ? parsedCap.error : undefined;

  const submit = async (event: Event) => {
    event.preventDefault();
    setSaved("");
    if (capError) return setError(`Cap: ${capError}`);
    const update: MessageInitShape<typeof UpdateAccountRequestSchema> = { accountId: account.id };
    if (parsedCap?.ok && parsedCap.micros !== account.spendCapUsdMicros) update.spendCapUsdMicros = parsedCap.micros;
    if (onboarded !== account.onboardingComplete) update.onboardingComplete = onboarded;
    if (payment !== account.paymentStatus) update.paymentStatus = payment as PaymentStatus;
    if (subscription !== account.subscriptionStatus) update.subscriptionStatus = subscription as SubscriptionStatus;
    if (Object.keys(update).length === 1) return setSaved("Nothing changed.");
    setBusy(true);
    setError(undefined);
    try {
      const out = await admin.updateAccount(update);
      if (out.account) onSaved(out.account);
      setSaved("Saved.");
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form-grid" onSubmit={submit}>
      <label for="edit-cap">Monthly spend cap in US dollars</label>
      <input
        id="edit-cap"
        type="text"
        inputMode="decimal"
        autoComplete="off"
        aria-invalid={capError ? "true" : undefined}
        aria-describedby="edit-cap-hint"
        value={cap}
        onInput={(e) => setCap(e.currentTarget.value)}
      />
      <p id="edit-cap-hint" class="hint">
        {capError ?? "Exact to the micro-dollar. Leaving it empty keeps the cap as it is."}
      </p>
      <div class="check">
        <input
          id="edit-onboarded"
          type="checkbox"
          checked={onboarded}
          onChange={(e) => setOnboarded(e.currentTarget.checked)}
        />
        <label for="edit-onboarded">Onboarding complete</label>
      </div>
      <label for="edit-payment">Payment status</label>
      <select id="edit-payment" value={payment} onChange={(e) => setPayment(Number(e.currentTarget.value))}>
        {PAYMENT.filter(([s]) => s !== PaymentStatus.UNSPECIFIED || account.paymentStatus === s).map(([s, label]) => (
          <option key={s} value={s}>
            {label}
          </option>
        ))}
      </select>
      <label for="edit-subscription">Subscription status</label>
      <select
        id="edit-subscription"
        value={subscription}
        onChange={(e) => setSubscription(Number(e.currentTarget.value))}
      >
        {SUBSCRIPTION.filter(([s]) => s !== SubscriptionStatus.UNSPECIFIED || account.subscriptionStatus === s).map(
          ([s, label]) => (
            <option key={s} value={s}>
              {label}
            </option>
          ),
        )}
      </select>
      <button type="submit" disabled={busy}>
        {busy ? "Saving…" : "Save changes"}
      </button>
      <p role="status" class="muted">
        {saved}
      </p>
      {error !== undefined && <ErrorAlert error={error} />}
    </form>
  );
}
