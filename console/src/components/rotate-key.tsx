/**
 * The operator's rotation step for one key (`RotateApiKey`): the grace period the old secret keeps working,
 * asked for before anything happens. The key keeps its id, limits and spend; only its secret changes, and the
 * new one is shown once by the caller.
 */
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { useEffect, useRef, useState } from "preact/hooks";
import { admin } from "../api.ts";
import { ErrorAlert } from "./feedback.tsx";
import type { KeyRow } from "./keys-table.tsx";

/** The longest grace the server takes: 30 days, in minutes. */
const MAX_GRACE_MINUTES = 30 * 24 * 60;

/** The rotate panel, focused on its grace field when it appears; `onRotated` gets the new secret and prefix. */
export function RotateKey(props: {
  apiKey: KeyRow;
  onRotated: (secret: string, prefix: string) => void;
  onCancel: () => void;
}) {
  const [minutes, setMinutes] = useState("60");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const submit = async (event: Event) => {
    event.preventDefault();
    const grace = Number(minutes.trim() === "" ? "0" : minutes);
    if (!Number.isFinite(grace) || grace < 0 || grace > MAX_GRACE_MINUTES)
      return setError(
        `The grace period must be a number of minutes from 0 to ${MAX_GRACE_MINUTES.toLocaleString("en-US")}.`,
      );
    setBusy(true);
    setError(undefined);
    try {
      const out = await admin.rotateApiKey({
        apiKeyId: props.apiKey.id,
        gracePeriod: durationFromMs(Math.round(grace * 60_000)),
      });
      props.onRotated(out.secret, out.apiKey?.prefix ?? "");
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card confirm form-grid" onSubmit={submit} aria-labelledby="rotate-heading">
      <h3 id="rotate-heading">Rotate key {props.apiKey.prefix}…?</h3>
      <p>
        The key gets a new secret, shown once; its id, limits and spend stay. The old secret keeps working for the grace
        period, then gets 401 invalid_api_key. A secret replaced by an earlier rotation stops at once.
      </p>
      <label for="rotate-grace">Grace period for the old secret, in minutes</label>
      <input
        id="rotate-grace"
        ref={field}
        type="number"
        min="0"
        max={MAX_GRACE_MINUTES}
        step="any"
        inputMode="decimal"
        value={minutes}
        onInput={(e) => setMinutes(e.currentTarget.value)}
      />
      <p class="hint">0 ends the old secret at once; at most 30 days.</p>
      <div class="row">
        <button type="submit" class="danger" disabled={busy}>
          {busy ? "Rotating…" : "Rotate key"}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
      {error !== undefined && <ErrorAlert error={error} />}
    </form>
  );
}
