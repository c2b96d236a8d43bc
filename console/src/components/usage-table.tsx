/**
 * Usage records, a page at a time, with a CSV download of every record. The holder's page and the operator's
 * account page share it; each passes the RPC that lists its records.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { errorReason, retryDelayMs } from "../api.ts";
import { type UsageRow, usageCsv } from "../csv.ts";
import { downloadText } from "../download.ts";
import { formatUsd } from "../money.ts";
import { delay, formatTime, utcDate } from "../time.ts";
import { useAsync } from "../use-async.ts";
import { AsyncView, Empty, ErrorAlert } from "./feedback.tsx";
import { TableWrap } from "./table-wrap.tsx";

/** One page of records and the token of the next (empty on the last page). */
export interface UsagePage {
  usageRecords: UsageRow[];
  nextPageToken: string;
}

/** Lists one page: the holder's or the operator's `ListUsageRecords`. */
export type FetchUsagePage = (pageSize: number, pageToken: string) => Promise<UsagePage>;

const PAGE_SIZE = 25;
/** The largest page the RPC allows, for the CSV export: fewer calls against the key's rate limit. */
const EXPORT_PAGE_SIZE = 1000;
const EXPORT_TRIES = 5;

/** Fetches a page, waiting out the key's rate limit (the delay the server names) a few times. */
async function fetchPatiently(fetchPage: FetchUsagePage, pageToken: string): Promise<UsagePage> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetchPage(EXPORT_PAGE_SIZE, pageToken);
    } catch (err) {
      const wait = retryDelayMs(err);
      if (errorReason(err) !== "api_key_rate_limited" || wait === undefined || attempt >= EXPORT_TRIES) throw err;
      await delay(wait);
    }
  }
}

type Export = { status: "idle" } | { status: "running"; count: number } | { status: "done"; count: number };

/** The CSV download button and its progress. */
function CsvExport({ fetchPage, filePrefix }: { fetchPage: FetchUsagePage; filePrefix: string }) {
  const [state, setState] = useState<Export>({ status: "idle" });
  const [error, setError] = useState<unknown>(undefined);
  const run = async () => {
    setError(undefined);
    setState({ status: "running", count: 0 });
    const rows: UsageRow[] = [];
    try {
      let token = "";
      do {
        const page = await fetchPatiently(fetchPage, token);
        rows.push(...page.usageRecords);
        setState({ status: "running", count: rows.length });
        token = page.nextPageToken;
      } while (token !== "");
      downloadText(`${filePrefix}-${utcDate()}.csv`, usageCsv(rows));
      setState({ status: "done", count: rows.length });
    } catch (err) {
      setError(err);
      setState({ status: "idle" });
    }
  };
  return (
    <>
      <button type="button" onClick={run} disabled={state.status === "running"}>
        Download CSV of all records
      </button>
      <p role="status" class="muted">
        {state.status === "running" && `${state.count.toLocaleString("en-US")} records…`}
        {state.status === "done" && `Downloaded ${state.count.toLocaleString("en-US")} records.`}
      </p>
      {error !== undefined && <ErrorAlert error={error} />}
    </>
  );
}

/** Previous and Next, with the page number; nothing when all records fit on the first page. */
function Pager(props: { pageNumber: number; hasNext: boolean; onPrevious: () => void; onNext: () => void }) {
  const { pageNumber, hasNext, onPrevious, onNext } = props;
  if (pageNumber === 1 && !hasNext) return null;
  return (
    <nav class="pager" aria-label="Usage pages">
      <button type="button" disabled={pageNumber === 1} onClick={onPrevious}>
        Previous page
      </button>
      <span aria-live="polite">Page {pageNumber}</span>
      <button type="button" disabled={!hasNext} onClick={onNext}>
        Next page
      </button>
    </nav>
  );
}

/** Reloads the first page: new calls show up at the top. */
function RefreshButton({ onClick }: { onClick: () => void }) {
  return (
    <button type="button" class="secondary" onClick={onClick}>
      Refresh
    </button>
  );
}

/** The records of one page as a table. */
function RecordsTable({ records }: { records: readonly UsageRow[] }) {
  return (
    <TableWrap label="Usage table">
      <table class="usage">
        <caption class="visually-hidden">Usage records, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Model</th>
            <th scope="col" class="num">
              Prompt tokens
            </th>
            <th scope="col" class="num">
              Completion tokens
            </th>
            <th scope="col" class="num">
              Cost
            </th>
            <th scope="col">Completion id</th>
            <th scope="col">API key id</th>
          </tr>
        </thead>
        <tbody>
          {records.map((r) => (
            <tr key={r.id} data-id={r.id}>
              <td class="nowrap">{formatTime(r.createTime)}</td>
              <td class="nowrap">{r.model}</td>
              <td class="num">{r.promptTokens.toLocaleString("en-US")}</td>
              <td class="num">{r.completionTokens.toLocaleString("en-US")}</td>
              <td class="num" data-cost-micros={r.costUsdMicros.toString()}>
                {formatUsd(r.costUsdMicros)}
              </td>
              <td>
                <code>{r.id}</code>
              </td>
              <td>
                <code>{r.apiKeyId}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

/**
 * The paged table. It lists one account's records: give it a `key` per account so another account starts
 * over on page one. `empty` is the empty state, which says how usage comes about.
 */
export function UsageTable(props: { fetchPage: FetchUsagePage; filePrefix: string; empty: ComponentChildren }) {
  const { fetchPage, filePrefix, empty } = props;
  // The page tokens walked so far: the last one is the page shown; Previous pops it.
  const [tokens, setTokens] = useState<string[]>([""]);
  const token = tokens.at(-1) ?? "";
  const [state, reload] = useAsync(() => fetchPage(PAGE_SIZE, token), [token]);
  const pageNumber = tokens.length;
  const refresh = () => (pageNumber === 1 ? reload() : setTokens([""]));
  return (
    <div class="usage-table">
      <AsyncView state={state} what="usage records" retry={reload}>
        {(page) =>
          page.usageRecords.length === 0 && pageNumber === 1 ? (
            <>
              <Empty>{empty}</Empty>
              <RefreshButton onClick={refresh} />
            </>
          ) : (
            <>
              <div class="toolbar">
                <RefreshButton onClick={refresh} />
                <CsvExport fetchPage={fetchPage} filePrefix={filePrefix} />
              </div>
              <RecordsTable records={page.usageRecords} />
              <Pager
                pageNumber={pageNumber}
                hasNext={page.nextPageToken !== ""}
                onPrevious={() => setTokens((t) => (t.length > 1 ? t.slice(0, -1) : t))}
                onNext={() => setTokens((t) => [...t, page.nextPageToken])}
              />
            </>
          )
        }
      </AsyncView>
    </div>
  );
}
