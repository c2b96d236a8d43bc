import { sluiceError } from "../errors/catalogue.ts";
import type { CallOutcome, Store } from "../store/store.ts";

/** The store steps of a call that a test can pause or disturb. */
export type CallStep = "chargeRateLimit" | "extendReservation" | "settle" | "release";

/** A pause a test set on a store step: `arrived` when a call reaches it, `open` to let it go on. */
export interface Gate {
  arrived: Promise<void>;
  open(): void;
}

/**
 * A store wrapper for lifecycle tests. It makes races deterministic instead of hoping a sleep
 * hits them: a step can be paused until the test opens its gate, or made to lose its reply
 * (the command runs, then the caller sees a timeout) or its request (the caller sees a
 * timeout, the command never runs). It also records every outcome the store gave per
 * completion id, so a test can prove each call ended in exactly one settle or one release.
 */
export interface GatedStore extends Store {
  /** Pauses the next call of `step` (before it reaches the inner store) until the gate opens. */
  pause(step: CallStep): Gate;
  /** The next call of `step` runs, but its caller gets a 503 as if the reply timed out. */
  loseReply(step: CallStep): void;
  /** The next call of `step` does not run; its caller gets a 503 as if the request timed out. */
  loseRequest(step: CallStep): void;
  /** Outcomes the inner store returned, by completion id, in order (settle and release calls that ran). */
  readonly outcomes: Map<string, CallOutcome[]>;
}

/** Wraps `inner`; see `GatedStore`. */
export function gatedStore(inner: Store): GatedStore {
  const gates = new Map<CallStep, Array<{ wait: Promise<void>; arrive: () => void }>>();
  const lostReplies = new Set<CallStep>();
  const lostRequests = new Set<CallStep>();
  const outcomes = new Map<string, CallOutcome[]>();
  const lost = () =>
    sluiceError("service_unavailable", { retryAfterMs: 1000, message: "the store did not answer in time (test)" });

  /** Runs one step through its gate and its disturbances. */
  async function step<T>(name: CallStep, run: () => Promise<T>): Promise<T> {
    const gate = gates.get(name)?.shift();
    if (gate) {
      gate.arrive();
      await gate.wait;
    }
    if (lostRequests.delete(name)) throw lost();
    const result = await run();
    if (lostReplies.delete(name)) throw lost();
    return result;
  }
  const record = (id: string, outcome: CallOutcome) => {
    outcomes.set(id, [...(outcomes.get(id) ?? []), outcome]);
    return outcome;
  };

  return {
    ...inner,
    chargeRateLimit: (request) => step("chargeRateLimit", () => inner.chargeRateLimit(request)),
    extendReservation: (request) => step("extendReservation", () => inner.extendReservation(request)),
    settle: (request) => step("settle", async () => record(request.reservationId, await inner.settle(request))),
    release: (reservation) =>
      step("release", async () => record(reservation.reservationId, await inner.release(reservation))),
    pause(name) {
      let open: () => void = () => undefined;
      let arrive: () => void = () => undefined;
      const wait = new Promise<void>((resolve) => {
        open = resolve;
      });
      const arrived = new Promise<void>((resolve) => {
        arrive = resolve;
      });
      gates.set(name, [...(gates.get(name) ?? []), { wait, arrive }]);
      return { arrived, open };
    },
    loseReply: (name) => void lostReplies.add(name),
    loseRequest: (name) => void lostRequests.add(name),
    outcomes,
  };
}
