/**
 * A circuit breaker per upstream: after `failureThreshold` failures in a row it opens and the
 * upstream is set aside for `openMs`; then one probe call is let through (half-open), and its
 * outcome closes the breaker or opens it again. This keeps a dead model server from costing
 * every call a connect timeout.
 */
export interface Breaker {
  /**
   * Whether a call may go to this upstream now: "call" while closed, "probe" for the one call
   * let through half-open (only its owner may `release` the slot), false otherwise.
   */
  tryAcquire(): "call" | "probe" | false;
  /** Whether a call could be let through now (for readiness), without taking the probe. */
  available(): boolean;
  success(): void;
  failure(): void;
  /** Ends a probe that proved nothing (its client went away), freeing the half-open slot. */
  release(): void;
  readonly state: "closed" | "open" | "half-open";
}

export interface BreakerOptions {
  failureThreshold: number;
  openMs: number;
  now?: () => number;
}

export function createBreaker(options: BreakerOptions): Breaker {
  const now = options.now ?? Date.now;
  let state: Breaker["state"] = "closed";
  let failures = 0;
  let openedAt = 0;
  let probing = false;
  const due = () => state === "open" && now() - openedAt >= options.openMs;
  const open = () => {
    state = "open";
    openedAt = now();
    probing = false;
  };
  return {
    get state() {
      if (due()) state = "half-open";
      return state;
    },
    available() {
      return state === "closed" || due() || (state === "half-open" && !probing);
    },
    tryAcquire() {
      if (due()) state = "half-open";
      if (state === "closed") return "call";
      if (state === "half-open" && !probing) {
        probing = true;
        return "probe";
      }
      return false;
    },
    success() {
      state = "closed";
      failures = 0;
      probing = false;
    },
    failure() {
      failures += 1;
      if (state === "half-open" || failures >= options.failureThreshold) open();
    },
    release() {
      probing = false;
    },
  };
}
