/**
 * What a client was told about one call. The final checks turn on this, so each kind says
 * what billing it allows:
 * - `success`: JSON 200 with an id, an SSE stream with its usage chunk and `[DONE]`, or a gRPC
 *   answer with its usage: exactly one usage record.
 * - `spend-cap-abort`: `event: error` with `spend_cap_exceeded` (gRPC: that reason after some
 *   events): the delivered chunks may be charged as a partial, never a usage record.
 * - `internal-error`: the `service_unavailable` event (gRPC: another Sluice error after some
 *   events): not billed.
 * - `error-status`: an HTTP error status, or a gRPC error before any event: not billed.
 * - `client-left`: the soak's client went away on purpose before a terminal event: either way.
 * - `cut-off`: the connection ended with no terminal event (a killed process): either way.
 * - `unreachable`: no connection could be made: nothing happened.
 * - `malformed`: an answer that fits none of the above (a soak or Sluice bug; reported).
 */
export type Told =
  | "success"
  | "spend-cap-abort"
  | "internal-error"
  | "error-status"
  | "client-left"
  | "cut-off"
  | "unreachable"
  | "malformed";

/** Every kind, in report order. */
export const TOLD_KINDS: readonly Told[] = [
  "success",
  "spend-cap-abort",
  "internal-error",
  "error-status",
  "client-left",
  "cut-off",
  "unreachable",
  "malformed",
];

/** Kinds after which the call may or may not have been billed. */
export const UNKNOWN_KINDS: ReadonlySet<Told> = new Set<Told>(["client-left", "cut-off"]);
/** Kinds that promise the call was not billed. */
export const NOT_BILLED_KINDS: ReadonlySet<Told> = new Set<Told>(["internal-error", "error-status"]);

/** How a call reached Sluice. */
export type Via = "edge-json" | "edge-sse" | "grpc-unary" | "grpc-stream";

/** One finished call, as the client saw it. */
export interface CallResult {
  via: Via;
  accountIndex: number;
  model: string;
  told: Told;
  /** The completion id, when the client saw one. */
  id?: string;
  /** A short label for the figures: HTTP status and code, gRPC reason, leave stage. */
  detail: string;
  /** Content chunks (or deltas) the client received. */
  chunks: number;
}

/** Counts by key, for the progress line and the figures table. */
export class Tally {
  readonly counts = new Map<string, number>();
  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }
  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  total(): number {
    let sum = 0;
    for (const n of this.counts.values()) sum += n;
    return sum;
  }
  /** "a 3, b 2", largest first. */
  line(): string {
    return [...this.counts.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(", ");
  }
}
