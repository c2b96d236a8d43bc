/**
 * The holder's usage page: every completed call's record, a page at a time, and all of them as CSV.
 */
import { billing } from "../api.ts";
import { Page } from "../components/page.tsx";
import { type FetchUsagePage, UsageTable } from "../components/usage-table.tsx";

/** The holder's `ListUsageRecords`; module-level so the table sees the same function every render. */
const fetchOwnUsage: FetchUsagePage = (pageSize, pageToken) => billing.listUsageRecords({ pageSize, pageToken });

/** The usage page. */
export function UsagePage() {
  return (
    <Page title="Usage">
      <p>Each completed chat call leaves one record with its tokens and its exact charge. Newest first; times UTC.</p>
      <UsageTable
        fetchPage={fetchOwnUsage}
        filePrefix="sluice-usage"
        empty={
          <>
            No usage yet — make a call with your key to <code>/v1/chat/completions</code> and it will show here.
          </>
        }
      />
    </Page>
  );
}
