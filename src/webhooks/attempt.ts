import type { DueDelivery } from "../store/store.ts";
import { spendAlertBody } from "./payload.ts";
import { webhookHeaders } from "./signing.ts";

/** How one attempt went: 2xx delivered it; anything else, no answer in time or no connection did not. */
export interface AttemptResult {
  delivered: boolean;
  httpStatus?: number;
  /** Why it was not delivered, in words (never the URL, which may hold a token). */
  error?: string;
}

/** What an attempt needs besides the delivery. */
export interface AttemptOptions {
  /** The attempt's time (ms): its `webhook-timestamp`. */
  nowMs: number;
  timeoutMs: number;
  /** Aborts the attempt at once (the process stops). */
  stop: AbortSignal;
  fetch: typeof fetch;
}

/** The `code` of a network error's cause (ECONNREFUSED), if it has one. */
function codeOf(err: unknown): string | undefined {
  const cause = err instanceof Error ? err.cause : undefined;
  const code = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined;
  return typeof code === "string" ? code : undefined;
}

/**
 * POSTs one delivery of an alert to its endpoint, signed (`webhookHeaders`), within `timeoutMs`.
 * Redirects are not followed (a 3xx is not a delivery), and the answer's body is not read.
 */
export async function attemptDelivery(due: DueDelivery, options: AttemptOptions): Promise<AttemptResult> {
  const body = spendAlertBody(due.alert);
  const timestamp = Math.floor(options.nowMs / 1000);
  const timeout = AbortSignal.timeout(options.timeoutMs);
  try {
    const res = await options.fetch(due.endpoint.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "Sluice-Webhooks/1",
        ...webhookHeaders(due.endpoint.secret, due.alert.id, timestamp, body),
      },
      body,
      redirect: "manual",
      signal: AbortSignal.any([timeout, options.stop]),
    });
    await res.body?.cancel().catch(() => undefined);
    const delivered = res.status >= 200 && res.status < 300;
    return { delivered, httpStatus: res.status, ...(!delivered && { error: `HTTP ${res.status}` }) };
  } catch (err) {
    if (options.stop.aborted) return { delivered: false, error: "the sending process stopped" };
    if (timeout.aborted) return { delivered: false, error: `no answer within ${options.timeoutMs} ms` };
    const code = codeOf(err);
    return { delivered: false, error: `connection failed${code ? ` (${code})` : ""}` };
  }
}
