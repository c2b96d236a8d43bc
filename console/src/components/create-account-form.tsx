/**
 * The operator's form to open an account (`AdminService.CreateAccount`): optional email, optional cap in
 * dollars (parsed to exact micros), and whether onboarding is complete. On success it goes to the account.
 */
import { useState } from "preact/hooks";
import { admin } from "../api.ts";
import { parseUsd } from "../money.ts";
import { navigate } from "../router.ts";
import { ErrorAlert } from "./feedback.tsx";

/** The create-account form. */
export function CreateAccountForm() {
  const [email, setEmail] = useState("");
  const [cap, setCap] = useState("");
  const [onboarded, setOnboarded] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const parsedCap = cap.trim() === "" ? undefined : parseUsd(cap);
  const capError = parsedCap && !parsedCap.ok ? parsedCap.error : undefined;

  const submit = async (event: Event) => {
    event.preventDefault();
    if (capError) return setError(`Cap: ${capError}`);
    setBusy(true);
    setError(undefined);
    try {
      const { account } = await admin.createAccount({
        ...(email.trim() !== "" && { email: email.trim() }),
        ...(parsedCap?.ok && { spendCapUsdMicros: parsedCap.micros }),
        onboardingComplete: onboarded,
      });
      if (account) navigate(`/admin/accounts/${encodeURIComponent(account.id)}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <form class="card form-grid" onSubmit={submit}>
      <label for="new-email">Email (optional)</label>
      <input
        id="new-email"
        type="email"
        autoComplete="off"
        value={email}
        onInput={(e) => setEmail(e.currentTarget.value)}
      />
      <label for="new-cap">Monthly spend cap in US dollars (optional)</label>
      <input
        id="new-cap"
        type="text"
        inputMode="decimal"
        autoComplete="off"
        placeholder="25.00"
        aria-invalid={capError ? "true" : undefined}
        aria-describedby="new-cap-hint"
        value={cap}
        onInput={(e) => setCap(e.currentTarget.value)}
      />
      <p id="new-cap-hint" class="hint">
        {capError ?? "Without a cap the account cannot make calls (onboarding stays incomplete)."}
      </p>
      <div class="check">
        <input
          id="new-onboarded"
          type="checkbox"
          checked={onboarded}
          onChange={(e) => setOnboarded(e.currentTarget.checked)}
        />
        <label for="new-onboarded">Onboarding complete</label>
      </div>
      <button type="submit" disabled={busy}>
        {busy ? "Creating…" : "Create account"}
      </button>
      {error !== undefined && <ErrorAlert error={error} />}
    </form>
  );
}
