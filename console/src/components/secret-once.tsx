/**
 * A new secret, the one time `CreateApiKey` or `RotateApiKey` returns it: shown in a read-only field with a
 * copy button and a plain warning that it cannot be shown again. It lives only in this component's state.
 */
import { useState } from "preact/hooks";

/** The secret panel, headed by `title`; `onDone` hides it (and so forgets the secret). */
export function SecretOnce(props: { title: string; secret: string; prefix: string; onDone: () => void }) {
  const { title, secret, prefix, onDone } = props;
  const [copied, setCopied] = useState("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied to the clipboard.");
    } catch {
      setCopied("Copying failed: select the secret and copy it by hand.");
    }
  };
  return (
    <div class="card secret" data-secret-prefix={prefix}>
      <h3>{title}</h3>
      <p>
        <strong>Copy the secret now: you won't see it again.</strong> Sluice keeps only a hash of it.
      </p>
      <label for="new-secret">Secret</label>
      <div class="row">
        <input
          id="new-secret"
          type="text"
          readOnly
          value={secret}
          spellcheck={false}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status" class="muted">
        {copied}
      </p>
      <button type="button" class="secondary" onClick={onDone}>
        I have saved it — hide the secret
      </button>
    </div>
  );
}
