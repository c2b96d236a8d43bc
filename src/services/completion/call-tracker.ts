import { sluiceError } from "../../errors/catalogue.ts";

/** The delay suggested to a call refused because the process is full. */
const FULL_RETRY_MS = 1000;

/**
 * Counts the chat calls a process runs, so that it can refuse more than it can hold (503 with
 * `Retry-After`, never an unbounded queue), and so that a shutdown can wait for every call's
 * last store step (a settle or a release) before it closes the store.
 */
export interface CallTracker {
  /**
   * Takes a slot for a new call, or throws 503 `service_unavailable` when the process is full. Returns the slot's
   * release (idempotent).
   */
  enter(): () => void;
  /** Keeps a shutdown waiting for `work` (a call's lifecycle or a background release) to end. */
  track(work: Promise<unknown>): void;
  /** Calls holding a slot now. */
  readonly active: number;
  /** Resolves true once no slot and no tracked work remains, or false after `timeoutMs`. */
  drain(timeoutMs: number): Promise<boolean>;
  /** Aborted by `stop`: background retries give up instead of outliving the process. */
  readonly stopping: AbortSignal;
  stop(): void;
}

/** Builds a tracker that lets at most `limit` calls run at once. */
export function createCallTracker(limit: number): CallTracker {
  let active = 0;
  const work = new Set<Promise<unknown>>();
  const stopper = new AbortController();
  let idle: Array<() => void> = [];
  const checkIdle = () => {
    if (active > 0 || work.size > 0) return;
    const waiting = idle;
    idle = [];
    for (const resolve of waiting) resolve();
  };
  return {
    enter() {
      if (active >= limit)
        throw sluiceError("service_unavailable", {
          message: "The service is at its limit of calls in flight. Retry after the delay given.",
          retryAfterMs: FULL_RETRY_MS,
        });
      active += 1;
      let left = false;
      return () => {
        if (left) return;
        left = true;
        active -= 1;
        checkIdle();
      };
    },
    track(promise) {
      const p = promise
        .catch(() => undefined)
        .finally(() => {
          work.delete(p);
          checkIdle();
        });
      work.add(p);
    },
    get active() {
      return active;
    },
    drain(timeoutMs) {
      if (active === 0 && work.size === 0) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        idle.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
    stopping: stopper.signal,
    stop: () => stopper.abort(),
  };
}
