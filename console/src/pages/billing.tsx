/**
 * The holder's billing page: this period's spend against the cap, by day and in figures, with the forecast of
 * when the cap is reached; the account's standing; and a form to estimate a call before making it. Everything
 * shown is what `GetBalance`, `GetSpendByDay` and `EstimateChatCompletion` return.
 */
import { billing } from "../api.ts";
import { CapForecast } from "../components/cap-forecast.tsx";
import { EstimateForm } from "../components/estimate-form.tsx";
import { AsyncView } from "../components/feedback.tsx";
import { Page } from "../components/page.tsx";
import { SpendChart } from "../components/spend-chart.tsx";
import { SpendFigures } from "../components/spend-figures.tsx";
import { Standing } from "../components/standing.tsx";
import { useAsync } from "../use-async.ts";

/** Both RPCs at once: the figures and standing, and the days for the chart. */
function loadBilling() {
  return Promise.all([billing.getBalance({}), billing.getSpendByDay({})]);
}

/** The billing page. */
export function BillingPage() {
  const [state, reload] = useAsync(loadBilling, []);
  return (
    <Page title="Billing">
      <AsyncView state={state} what="billing" retry={reload}>
        {([balance, spend]) => (
          <>
            <section aria-labelledby="standing-heading">
              <h2 id="standing-heading">Account standing</h2>
              <Standing reason={balance.standingReason} />
            </section>
            <section aria-labelledby="period-heading">
              <h2 id="period-heading">This period ({balance.period}, UTC)</h2>
              <SpendFigures figures={balance} />
              <CapForecast figures={balance} />
              <SpendChart spend={spend} />
              <button type="button" class="secondary" onClick={reload}>
                Refresh
              </button>
            </section>
          </>
        )}
      </AsyncView>
      <section aria-labelledby="estimate-heading">
        <h2 id="estimate-heading">Estimate a call</h2>
        <EstimateForm />
      </section>
    </Page>
  );
}
