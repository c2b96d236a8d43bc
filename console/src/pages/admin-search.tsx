/**
 * The operator's home: find an account by id or email (`AdminService.SearchAccounts`) and open a new one.
 */
import { useState } from "preact/hooks";
import type { Account } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { admin } from "../api.ts";
import { CreateAccountForm } from "../components/create-account-form.tsx";
import { AsyncView, Empty } from "../components/feedback.tsx";
import { Page } from "../components/page.tsx";
import { formatUsd } from "../money.ts";
import { href } from "../router.ts";
import { type AsyncState, useAsync } from "../use-async.ts";

/** The results of one search, a list of links to the accounts. */
function Results({ query, accounts }: { query: string; accounts: readonly Account[] }) {
  if (accounts.length === 0) {
    return (
      <Empty>
        No account matches “{query}”. Search by the full account id, or by the exact email (case does not matter).
      </Empty>
    );
  }
  return (
    <ul class="results">
      {accounts.map((a) => (
        <li key={a.id}>
          <a href={href(`/admin/accounts/${encodeURIComponent(a.id)}`)}>{a.email ?? "(no email)"}</a>
          <span class="muted">
            {" "}
            <code>{a.id}</code> · cap {a.spendCapUsdMicros === undefined ? "not set" : formatUsd(a.spendCapUsdMicros)} ·
            spent {formatUsd(a.spentUsdMicros)}
          </span>
        </li>
      ))}
    </ul>
  );
}

/** A submitted search; `n` counts submits, so searching the same text again runs again. */
interface Search {
  query: string;
  n: number;
}

/** Runs the submitted search; nothing until the first submit. */
function useSearch(search: Search | undefined): AsyncState<readonly Account[]> | undefined {
  const [state] = useAsync(
    async () => (search === undefined ? [] : (await admin.searchAccounts({ query: search.query })).accounts),
    [search],
  );
  return search === undefined ? undefined : state;
}

/** The search page. */
export function AdminSearchPage() {
  const [input, setInput] = useState("");
  const [search, setSearch] = useState<Search | undefined>(undefined);
  const state = useSearch(search);
  return (
    <Page title="Accounts">
      <section aria-labelledby="find-heading">
        <h2 id="find-heading">Find an account</h2>
        <form
          class="search"
          onSubmit={(e) => {
            e.preventDefault();
            setSearch({ query: input.trim(), n: (search?.n ?? 0) + 1 });
          }}
        >
          <label for="account-query">Account id or email</label>
          <div class="row">
            <input
              id="account-query"
              type="search"
              required
              autoComplete="off"
              value={input}
              onInput={(e) => setInput(e.currentTarget.value)}
            />
            <button type="submit">Search</button>
          </div>
        </form>
        {state && search && (
          <AsyncView state={state} what="accounts">
            {(accounts) => <Results query={search.query} accounts={accounts} />}
          </AsyncView>
        )}
      </section>
      <section aria-labelledby="create-heading">
        <h2 id="create-heading">Create an account</h2>
        <CreateAccountForm />
      </section>
    </Page>
  );
}
