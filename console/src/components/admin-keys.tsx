/**
 * An account's keys for the operator: the list (`ListApiKeys`), a form to issue one (`CreateApiKey`, whose
 * secret is shown once, with an optional expiry), rotation (`RotateApiKey`, a new secret for the same key with
 * a grace period for the old one) and revocation (`RevokeApiKey`), each behind an explicit step.
 */
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { useEffect, useRef, useState } from "preact/hooks";
import { admin } from "../api.ts";
import { parseUsd } from "../money.ts";
import { useAsync } from "../use-async.ts";
import { AsyncView, Empty, ErrorAlert } from "./feedback.tsx";
import { EditKeyLimits } from "./edit-key-limits.tsx";
import { type KeyRow, KeysTable } from "./keys-table.tsx";
import { RotateKey } from "./rotate-key.tsx";
import { SecretOnce } from "./secret-once.tsx";

/** A number typed in an optional field: nothing when empty, `NaN` when not a number. */
function optionalNumber(text: string): number | undefined {
  return text.trim() === "" ? undefined : Number(text);
}

/** The issue-a-key form; `onCreated` gets the secret and prefix to show once. */
function CreateKeyForm(props: { accountId: string; onCreated: (secret: string, prefix: string) => void }) {
  const [rps, setRps] = useState("");
  const [burst, setBurst] = useState("");
  const [days, setDays] = useState("");
  const [keyCap, setKeyCap] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    const rate = optionalNumber(rps);
    const size = optionalNumber(burst);
    const lifetime = optionalNumber(days);
    if (Number.isNaN(rate) || Number.isNaN(size)) return setError("Rate limit and burst must be numbers.");
    if (lifetime !== undefined && !(lifetime > 0)) return setError("The expiry must be a number of days above 0.");
    const cap = keyCap.trim() === "" ? undefined : parseUsd(keyCap);
    if (cap && !cap.ok) return setError(`Key spend cap: ${cap.error}`);
    setBusy(true);
    setError(undefined);
    try {
      const out = await admin.createApiKey({
        accountId: props.accountId,
        ...(rate !== undefined && { rateLimitRps: rate }),
        ...(size !== undefined && { burst: size }),
        ...(lifetime !== undefined && {
          expiration: { case: "ttl" as const, value: durationFromMs(Math.round(lifetime * 86_400_000)) },
        }),
        ...(cap?.ok && { spendCapUsdMicros: cap.micros }),
      });
      props.onCreated(out.secret, out.apiKey?.prefix ?? "");
      setRps("");
      setBurst("");
      setDays("");
      setKeyCap("");
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form-grid" onSubmit={submit} aria-labelledby="create-key-heading">
      <h3 id="create-key-heading">Issue a key</h3>
      <label for="key-rps">Rate limit, requests per second (optional)</label>
      <input
        id="key-rps"
        type="number"
        min="0"
        step="any"
        inputMode="decimal"
        value={rps}
        onInput={(e) => setRps(e.currentTarget.value)}
      />
      <label for="key-burst">Burst (optional)</label>
      <input
        id="key-burst"
        type="number"
        min="1"
        step="1"
        inputMode="numeric"
        value={burst}
        onInput={(e) => setBurst(e.currentTarget.value)}
      />
      <label for="key-cap">Key spend cap, US dollars a month (optional; the account's cap applies too)</label>
      <input id="key-cap" inputMode="decimal" value={keyCap} onInput={(e) => setKeyCap(e.currentTarget.value)} />
      <label for="key-expiry">Expires in, days (optional)</label>
      <input
        id="key-expiry"
        type="number"
        min="0"
        step="any"
        inputMode="decimal"
        value={days}
        onInput={(e) => setDays(e.currentTarget.value)}
      />
      <p class="hint">
        Left empty, the server's defaults apply (10 requests per second, burst 10) and the key never expires.
      </p>
      <button type="submit" disabled={busy}>
        {busy ? "Creating…" : "Create key"}
      </button>
      {error !== undefined && <ErrorAlert error={error} />}
    </form>
  );
}

/** The confirmation step before a revocation, focused when it appears. */
function ConfirmRevoke(props: { apiKey: KeyRow; onConfirm: () => void; onCancel: () => void; busy: boolean }) {
  const button = useRef<HTMLButtonElement>(null);
  useEffect(() => button.current?.focus(), []);
  return (
    <section class="card confirm" aria-labelledby="confirm-heading">
      <h3 id="confirm-heading">Revoke key {props.apiKey.prefix}…?</h3>
      <p>Calls with this key fail at once with 401 invalid_api_key. This cannot be undone.</p>
      <div class="row">
        <button type="button" class="danger" ref={button} onClick={props.onConfirm} disabled={props.busy}>
          {props.busy ? "Revoking…" : "Revoke key"}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </section>
  );
}

/** The keys section of the operator's account page. */
export function AdminKeys({ accountId }: { accountId: string }) {
  const [state, reload] = useAsync(() => admin.listApiKeys({ accountId }), [accountId]);
  const [created, setCreated] = useState<{ secret: string; prefix: string; title: string } | undefined>(undefined);
  const [confirming, setConfirming] = useState<KeyRow | undefined>(undefined);
  const [rotating, setRotating] = useState<KeyRow | undefined>(undefined);
  const [limiting, setLimiting] = useState<KeyRow | undefined>(undefined);
  /** Opens one key's panel (limits, rotation or revocation) and closes the others. */
  const open = (panel: "limits" | "rotate" | "revoke", key: KeyRow) => {
    setDone("");
    setLimiting(panel === "limits" ? key : undefined);
    setRotating(panel === "rotate" ? key : undefined);
    setConfirming(panel === "revoke" ? key : undefined);
  };
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [done, setDone] = useState("");

  const revoke = async (key: KeyRow) => {
    setBusy(true);
    setError(undefined);
    try {
      await admin.revokeApiKey({ apiKeyId: key.id });
      setDone(`Key ${key.prefix}… revoked.`);
      setConfirming(undefined);
      reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      {created && (
        <SecretOnce
          title={created.title}
          secret={created.secret}
          prefix={created.prefix}
          onDone={() => setCreated(undefined)}
        />
      )}
      <AsyncView state={state} what="keys" retry={reload}>
        {({ apiKeys }) =>
          apiKeys.length === 0 ? (
            <Empty>No keys yet: issue one below.</Empty>
          ) : (
            <KeysTable
              keys={apiKeys}
              action={(k) =>
                k.revoked ? (
                  "—"
                ) : (
                  <div class="row">
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Limits of key ${k.prefix}`}
                      onClick={() => open("limits", k)}
                    >
                      Limits
                    </button>
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Rotate key ${k.prefix}`}
                      onClick={() => open("rotate", k)}
                    >
                      Rotate
                    </button>
                    <button
                      type="button"
                      class="danger small"
                      aria-label={`Revoke key ${k.prefix}`}
                      onClick={() => open("revoke", k)}
                    >
                      Revoke
                    </button>
                  </div>
                )
              }
            />
          )
        }
      </AsyncView>
      {limiting && (
        <EditKeyLimits
          apiKey={limiting}
          onSaved={() => {
            setDone(`Limits of key ${limiting.prefix}… saved.`);
            setLimiting(undefined);
            reload();
          }}
          onCancel={() => setLimiting(undefined)}
        />
      )}
      {rotating && (
        <RotateKey
          apiKey={rotating}
          onRotated={(secret, prefix) => {
            setCreated({ secret, prefix, title: "New secret issued" });
            setDone(`Key ${rotating.prefix}… rotated: its new secret is ${prefix}….`);
            setRotating(undefined);
            reload();
          }}
          onCancel={() => setRotating(undefined)}
        />
      )}
      {confirming && (
        <ConfirmRevoke
          apiKey={confirming}
          busy={busy}
          onConfirm={() => revoke(confirming)}
          onCancel={() => setConfirming(undefined)}
        />
      )}
      <p role="status" class="muted">
        {done}
      </p>
      {error !== undefined && <ErrorAlert error={error} />}
      <CreateKeyForm
        accountId={accountId}
        onCreated={(secret, prefix) => {
          setCreated({ secret, prefix, title: "New key created" });
          reload();
        }}
      />
    </>
  );
}
