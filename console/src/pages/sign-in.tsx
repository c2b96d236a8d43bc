/**
 * The one sign-in form for both kinds of user: the pasted credential is an API key when it starts with
 * `svc_sk_`, else the admin token. It is checked with a cheap RPC of its kind before it is kept.
 */
import { useState } from "preact/hooks";
import { admin, identity, withCredential } from "../api.ts";
import { ErrorAlert } from "../components/feedback.tsx";
import { Page } from "../components/page.tsx";
import { href } from "../router.ts";
import { API_KEY_PREFIX, detectKind, kindLabel, signIn } from "../session.ts";

/** What the detected kind will give access to, shown as the user types. */
function hint(credential: string): string {
  if (credential === "") return `Paste an API key (it starts with ${API_KEY_PREFIX}) or the operator's admin token.`;
  return detectKind(credential) === "api_key"
    ? "Detected: API key. You will see your account's billing, usage and keys."
    : "Detected: admin token. You will manage accounts and their keys.";
}

/** Checks a credential with the RPC of its kind; throws the RPC's error when it is refused. */
async function verify(credential: string): Promise<void> {
  if (detectKind(credential) === "api_key") await identity.getCaller({}, withCredential(credential));
  else await admin.searchAccounts({ query: "" }, withCredential(credential));
}

/** The sign-in page; a successful sign-in re-renders the app for the new session. */
export function SignInPage() {
  const [value, setValue] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const credential = value.trim();

  const submit = async (event: Event) => {
    event.preventDefault();
    if (credential === "") {
      setError("Paste an API key or the admin token first.");
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await verify(credential);
      signIn(credential);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <Page title="Sign in">
      <form class="card sign-in" onSubmit={submit}>
        <label for="credential">API key or admin token</label>
        <input
          id="credential"
          name="credential"
          type="password"
          required
          autoComplete="off"
          autoCapitalize="off"
          spellcheck={false}
          aria-describedby="credential-hint"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
        <p id="credential-hint" class="hint" aria-live="polite" data-kind={credential && detectKind(credential)}>
          {hint(credential)}
        </p>
        <button type="submit" disabled={busy}>
          {busy ? `Checking the ${kindLabel(detectKind(credential))}…` : "Sign in"}
        </button>
        {error !== undefined && <ErrorAlert error={error} />}
      </form>
      <p class="muted">
        The credential stays in this browser tab only (session storage): it is never put in a URL or a cookie, and
        signing out or closing the tab forgets it. The <a href={href("/status")}>service status</a> needs no sign-in.
      </p>
    </Page>
  );
}
