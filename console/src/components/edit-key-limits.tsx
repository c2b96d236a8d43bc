/**
 * The operator's limits step for one key (`UpdateApiKey`): its own monthly spend cap and its tokens-per-minute
 * limit. Both fields are sent with an update mask, so an emptied field removes that limit on purpose rather
 * than being left as it was.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { admin } from "../api.ts";
import { formatInputUsd, parseUsd } from "../money.ts";
import { ErrorAlert } from "./feedback.tsx";
import type { KeyRow } from "./keys-table.tsx";

/** The paths of `UpdateApiKeyRequest.update_mask` this form owns. */
const MASK = ["spend_cap_usd_micros", "tokens_per_minute"];

/** The limits panel, focused on its first field; `onSaved` hears once the server has the new limits. */
export function EditKeyLimits(props: { apiKey: KeyRow; onSaved: () => void; onCancel: () => void }) {
  const { apiKey } = props;
  const [cap, setCap] = useState(
    apiKey.spendCapUsdMicros === undefined ? "" : formatInputUsd(apiKey.spendCapUsdMicros),
  );
  const [tpm, setTpm] = useState(apiKey.tokensPerMinute === undefined ? "" : String(apiKey.tokensPerMinute));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const submit = async (event: Event) => {
    event.preventDefault();
    const parsed = cap.trim() === "" ? undefined : parseUsd(cap);
    if (parsed && !parsed.ok) return setError(`Key spend cap: ${parsed.error}`);
    const tokens = tpm.trim() === "" ? undefined : Number(tpm);
    if (tokens !== undefined && !(Number.isInteger(tokens) && tokens >= 1))
      return setError("Tokens per minute must be a whole number of at least 1, or empty for no limit.");
    setBusy(true);
    setError(undefined);
    try {
      await admin.updateApiKey({
        apiKeyId: apiKey.id,
        ...(parsed?.ok && { spendCapUsdMicros: parsed.micros }),
        ...(tokens !== undefined && { tokensPerMinute: tokens }),
        updateMask: { paths: MASK },
      });
      props.onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card confirm form-grid" onSubmit={submit} aria-labelledby="limits-heading">
      <h3 id="limits-heading">Limits of key {apiKey.prefix}…</h3>
      <label for="limits-cap">Key spend cap, US dollars a month (empty: only the account's cap applies)</label>
      <input
        id="limits-cap"
        ref={field}
        inputMode="decimal"
        value={cap}
        onInput={(e) => setCap(e.currentTarget.value)}
      />
      <label for="limits-tpm">Tokens per minute (empty: no token limit)</label>
      <input
        id="limits-tpm"
        type="number"
        min="1"
        step="1"
        inputMode="numeric"
        value={tpm}
        onInput={(e) => setTpm(e.currentTarget.value)}
      />
      <p class="hint">
        Changes apply from the next call (the token limit within a second); calls in flight keep their holds.
      </p>
      <div class="row">
        <button type="submit" disabled={busy}>
          {busy ? "Saving…" : "Save limits"}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
      {error !== undefined && <ErrorAlert error={error} />}
    </form>
  );
}
