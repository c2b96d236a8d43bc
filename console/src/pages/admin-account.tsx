/**
 * One account for the operator: its details and figures (`GetAccount`), the edit form, its spend chart
 * (`GetSpendByDay`), its keys and its usage records, all through the Admin API.
 */
import { useMemo, useState } from "preact/hooks";
import type { Account } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { admin } from "../api.ts";
import { AccountEditForm, paymentLabel, subscriptionLabel } from "../components/account-edit-form.tsx";
import { AdminKeys } from "../components/admin-keys.tsx";
import { AsyncView } from "../components/feedback.tsx";
import { Page } from "../components/page.tsx";
import { SpendChart } from "../components/spend-chart.tsx";
import { SpendFigures } from "../components/spend-figures.tsx";
import { type FetchUsagePage, UsageTable } from "../components/usage-table.tsx";
import { href } from "../router.ts";
import { useAsync } from "../use-async.ts";

/** The account's fields as a description list. */
function Details({ account }: { account: Account }) {
  return (
    <dl class="details">
      <dt>Account id</dt>
      <dd>
        <code>{account.id}</code>
      </dd>
      <dt>Email</dt>
      <dd>{account.email ?? "Not set"}</dd>
      <dt>Onboarding</dt>
      <dd>{account.onboardingComplete ? "Complete" : "Incomplete: calls get 402 onboarding_incomplete"}</dd>
      <dt>Payment</dt>
      <dd>{paymentLabel(account.paymentStatus)}</dd>
      <dt>Subscription</dt>
      <dd>{subscriptionLabel(account.subscriptionStatus)}</dd>
    </dl>
  );
}

/** The period's chart, loaded apart from the account so a slow chart does not hold the page. */
function AccountSpend({ accountId, version }: { accountId: string; version: number }) {
  const [state, reload] = useAsync(() => admin.getSpendByDay({ accountId }), [accountId, version]);
  return (
    <AsyncView state={state} what="spend by day" retry={reload}>
      {(spend) => <SpendChart spend={spend} />}
    </AsyncView>
  );
}

/** The account page for `id`. */
export function AdminAccountPage({ id }: { id: string }) {
  const [state, reload] = useAsync(async () => (await admin.getAccount({ accountId: id })).account, [id]);
  const fetchUsage = useMemo<FetchUsagePage>(
    () => (pageSize, pageToken) => admin.listUsageRecords({ accountId: id, pageSize, pageToken }),
    [id],
  );
  // Bumped to reload the chart (after Refresh and saves) and to reset the edit form (after Refresh).
  const [chartVersion, setChartVersion] = useState(0);
  const [formVersion, setFormVersion] = useState(0);
  const saved = () => {
    reload();
    setChartVersion((v) => v + 1);
  };
  const refresh = () => {
    saved();
    setFormVersion((v) => v + 1);
  };
  return (
    <Page title="Account">
      <p>
        <a href={href("/admin")}>← All accounts</a>
      </p>
      <AsyncView state={state} what="the account" retry={reload}>
        {(account) =>
          account && (
            <>
              <section aria-labelledby="details-heading">
                <h2 id="details-heading">{account.email ?? "Account without email"}</h2>
                <Details account={account} />
              </section>
              <section aria-labelledby="period-heading">
                <h2 id="period-heading">This period ({account.period}, UTC)</h2>
                <SpendFigures figures={account} />
                <AccountSpend accountId={id} version={chartVersion} />
                <button type="button" class="secondary" onClick={refresh}>
                  Refresh
                </button>
              </section>
              <section aria-labelledby="edit-heading">
                <h2 id="edit-heading">Edit the account</h2>
                <AccountEditForm key={`${account.id}/${formVersion}`} account={account} onSaved={saved} />
              </section>
            </>
          )
        }
      </AsyncView>
      {state.status !== "error" && (
        <>
          <section aria-labelledby="keys-heading">
            <h2 id="keys-heading">API keys</h2>
            <AdminKeys accountId={id} />
          </section>
          <section aria-labelledby="usage-heading">
            <h2 id="usage-heading">Usage records</h2>
            <UsageTable
              key={id}
              fetchPage={fetchUsage}
              filePrefix={`sluice-usage-${id}`}
              empty="No usage yet: the account's keys have made no completed call."
            />
          </section>
        </>
      )}
    </Page>
  );
}
