import type { Logger } from "../../logger.ts";
import {
  wasNotSent,
  type CallOutcome,
  type ReleaseRequest,
  type SettleRequest,
  type Store,
} from "../../store/store.ts";

/** A call's billing outcome as far as the store has said: `unknown` while it has not answered. */
export type Resolved = CallOutcome | "unknown";

/** The hold a call took, by completion id, with the caller's clock for its release (`ReleaseRequest`). */
export type Hold = ReleaseRequest;

/** How long to chase an answer, and what stops the chase early (process shutdown). */
export interface ResolveOptions {
  deadlineMs: number;
  stop: AbortSignal;
  logger: Logger;
}

/** Delays between attempts while the store does not answer: short at first, then a second apart. */
const BACKOFF_MS = [50, 100, 200, 400, 800, 1000];

function pause(ms: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (stop.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      stop.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stop.addEventListener("abort", done, { once: true });
  });
}

/**
 * Closes a call's hold and learns its outcome by completion id, asking again until the store
 * answers. A release closes the id, so nothing sent earlier (an extension or a settle whose
 * reply was lost) can land after it; and if such a settle did land first, the release says
 * `settled`. Only then may the caller be told whether it was billed. Gives up (`unknown`)
 * after `deadlineMs`, or when the process stops.
 */
export async function releaseResolved(store: Store, hold: Hold, options: ResolveOptions): Promise<Resolved> {
  const until = Date.now() + options.deadlineMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await store.release(hold);
    } catch (err) {
      if (options.stop.aborted || Date.now() >= until) {
        options.logger.error("billing outcome unknown: the store did not answer", {
          completionId: hold.reservationId,
          error: err instanceof Error ? err.message : String(err),
        });
        return "unknown";
      }
    }
    await pause(BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)] ?? 1000, options.stop);
  }
}

/**
 * Settles a call and returns its outcome. When the settle's reply is lost (a stalled or lost
 * connection), the settle may still land, so the outcome is resolved by `releaseResolved`
 * before anyone is told anything about billing. A settle that was never sent (no connection)
 * cannot land, since nothing sends it again: the call is not billed, and its hold is released
 * in the background (`background`), or expires.
 */
export async function settleResolved(
  store: Store,
  request: SettleRequest,
  options: ResolveOptions,
  background: (work: Promise<unknown>) => void,
): Promise<Resolved> {
  try {
    return await store.settle(request);
  } catch (err) {
    if (!wasNotSent(err)) return releaseResolved(store, request, options);
    background(releaseResolved(store, request, options));
    return "released";
  }
}
