/**
 * Service status from the public `GET /readyz` (200 ready, 503 not): it needs no credential, so it works
 * signed in or out, and it is the page to check when RPCs cannot reach the server.
 */
import { AsyncView } from "../components/feedback.tsx";
import { Page } from "../components/page.tsx";
import { formatUtc } from "../time.ts";
import { useAsync } from "../use-async.ts";

/** What `/readyz` said, and when. */
interface Readiness {
  ready: boolean;
  httpStatus: number;
  checkedAt: Date;
}

/** Asks `/readyz`; a network failure rejects, which the page shows as unreachable. */
async function checkReady(): Promise<Readiness> {
  const response = await fetch("/readyz", { cache: "no-store", credentials: "omit" });
  return { ready: response.status === 200, httpStatus: response.status, checkedAt: new Date() };
}

/** The status page. */
export function StatusPage() {
  const [state, reload] = useAsync(checkReady, []);
  const failed = state.status === "error" ? new Error("Cannot reach the Sluice server: check your connection.") : null;
  return (
    <Page title="Service status">
      <AsyncView state={failed ? { status: "error", error: failed } : state} what="status" retry={reload}>
        {(r) => (
          <div class={`card status ${r.ready ? "ok" : "down"}`} data-ready={String(r.ready)}>
            <p class="status-line">
              <span class="dot" aria-hidden="true" />
              {r.ready ? "Ready: Sluice is serving calls." : `Not ready (HTTP ${r.httpStatus}): calls may fail.`}
            </p>
            <p class="muted">Checked {formatUtc(r.checkedAt)}.</p>
          </div>
        )}
      </AsyncView>
      <button type="button" class="secondary" onClick={reload}>
        Check again
      </button>
    </Page>
  );
}
