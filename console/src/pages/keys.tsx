/**
 * The holder's keys (`IdentityService.ListApiKeys`, no secrets) and the limits every call obeys.
 */
import { identity } from "../api.ts";
import { AsyncView, Empty } from "../components/feedback.tsx";
import { KeysTable } from "../components/keys-table.tsx";
import { Page } from "../components/page.tsx";
import { useAsync } from "../use-async.ts";

/** The keys page. */
export function KeysPage() {
  const [state, reload] = useAsync(() => identity.listApiKeys({}), []);
  return (
    <Page title="API keys">
      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading">Your keys</h2>
        <p>Keys are recognised by their first characters; the secret is shown only once, when a key is issued.</p>
        <AsyncView state={state} what="keys" retry={reload}>
          {({ apiKeys }) =>
            apiKeys.length === 0 ? <Empty>No API keys on this account.</Empty> : <KeysTable keys={apiKeys} />
          }
        </AsyncView>
        <p class="muted">New keys and revocations are made by your operator.</p>
      </section>
      <section aria-labelledby="limits-heading">
        <h2 id="limits-heading">Limits</h2>
        <ul>
          <li>
            Each call's input may hold at most <strong>32,768 tokens</strong>; a larger one is refused with 413{" "}
            <code>input_too_large</code>.
          </li>
          <li>
            A request body may be at most <strong>32 MiB</strong>; a larger one is refused with 413.
          </li>
          <li>
            Each key has its own rate limit (the table above): beyond its burst, calls get 429{" "}
            <code>api_key_rate_limited</code> with a <code>Retry-After</code>.
          </li>
          <li>
            A key may have a tokens-per-minute limit: each call takes its input plus its <code>max_tokens</code> and
            gives back what it did not use; a call the limit cannot cover yet gets 429 with a <code>Retry-After</code>,
            and every chat response reports the budget in <code>x-ratelimit-remaining-tokens</code>.
          </li>
          <li>
            A key may have a spend cap of its own besides the account's: a call runs only when both have room, otherwise
            it gets 402 <code>spend_cap_exceeded</code>. The table shows what each key spent this month.
          </li>
        </ul>
      </section>
    </Page>
  );
}
