/**
 * A bounded hand-off from a call's producer (the engine loop) to its one reader (the RPC that
 * sends the events). It is what lets one place own a call: the producer runs on its own and
 * never depends on the reader to finish it, yet a reader that stops reading pauses it
 * (backpressure), and one that stays stuck past `writeTimeoutMs` ends it.
 */
export interface Handoff<T> {
  /**
   * Hands over a value. Resolves at once while there is room; otherwise waits for the reader.
   * Rejects with the reason once the hand-off is cut, or with `ReaderStuckError` when the
   * reader has taken nothing for `writeTimeoutMs`.
   */
  push(value: T): Promise<void>;
  /**
   * Resolves once the reader has taken every value handed over; rejects when the hand-off is
   * cut, or with `ReaderStuckError` when the reader takes nothing for the write timeout.
   */
  whenEmpty(): Promise<void>;
  /** Ends the reader's sequence after the values already handed over. */
  close(): void;
  /** Ends the reader's sequence with `error`, after the values already handed over. */
  fail(error: unknown): void;
  /**
   * Stops the producer now: pending and later pushes reject with `reason` and buffered values
   * are dropped. The reader still waits for `close` or `fail`, which say how the call ended.
   */
  cut(reason: unknown): void;
  /** The reader's side. Its `return()` (a reader that leaves) calls `onReaderGone`. */
  readonly reader: AsyncIterableIterator<T>;
}

/** Thrown to the producer when the reader has not taken a value for the write timeout. */
export class ReaderStuckError extends Error {
  override name = "ReaderStuckError";
}

export interface HandoffOptions<T> {
  /** Values buffered before `push` waits: enough to batch, small enough to bound memory. */
  capacity: number;
  writeTimeoutMs: number;
  /** Called once when the reader stops early (its `return()` or `throw()`). */
  onReaderGone: () => void;
  /** Called with each value as the reader takes it: what was delivered, not only produced. */
  onTake?: (value: T) => void;
}

type Waiter<T> = { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void };

/**
 * One wait of the producer on the reader (for room, or for the buffer to empty): it ends when
 * `settle` is called, or fails with `ReaderStuckError` once the reader has taken nothing for
 * `timeoutMs` (`progress` restarts that clock).
 */
function createReaderWait(timeoutMs: number) {
  let pending: { resolve: () => void; reject: (e: unknown) => void; timer: NodeJS.Timeout } | undefined;
  const settle = (error?: unknown) => {
    const p = pending;
    if (!p) return;
    pending = undefined;
    clearTimeout(p.timer);
    if (error === undefined) p.resolve();
    else p.reject(error);
  };
  return {
    wait: () =>
      new Promise<void>((resolve, reject) => {
        pending = {
          resolve,
          reject,
          timer: setTimeout(
            () => settle(new ReaderStuckError("the reader took nothing within the write timeout")),
            timeoutMs,
          ),
        };
      }),
    settle,
    progress: () => void pending?.timer.refresh(),
  };
}

/** Builds a hand-off; see `Handoff`. */
export function createHandoff<T>(options: HandoffOptions<T>): Handoff<T> {
  const buffer: T[] = [];
  let end: { error: unknown } | "closed" | undefined;
  let cutReason: { reason: unknown } | undefined;
  let reader: Waiter<T> | undefined;
  let readerGone = false;
  /** The producer waiting for room in the buffer, and for the buffer to empty. */
  const space = createReaderWait(options.writeTimeoutMs);
  const empty = createReaderWait(options.writeTimeoutMs);

  /** Gives the waiting reader what it is owed: a value, the end, or the error. */
  const serve = () => {
    if (!reader) return;
    const r = reader;
    if (buffer.length > 0) {
      reader = undefined;
      const value = buffer.shift() as T;
      options.onTake?.(value);
      r.resolve({ value, done: false });
      space.settle();
      if (buffer.length === 0) empty.settle();
      else empty.progress();
      return;
    }
    if (end === "closed") {
      reader = undefined;
      r.resolve({ value: undefined, done: true });
    } else if (end) {
      reader = undefined;
      r.reject(end.error);
    }
  };

  const goneEarly = () => {
    if (readerGone) return;
    readerGone = true;
    if (end === undefined && !cutReason) options.onReaderGone();
  };

  const it: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]() {
      return it;
    },
    next() {
      return new Promise<IteratorResult<T>>((resolve, reject) => {
        reader = { resolve, reject };
        serve();
      });
    },
    async return() {
      goneEarly();
      return { value: undefined, done: true };
    },
    async throw(error: unknown) {
      goneEarly();
      throw error;
    },
  };

  return {
    push(value) {
      if (cutReason) return Promise.reject(cutReason.reason);
      buffer.push(value);
      serve();
      if (buffer.length <= options.capacity) return Promise.resolve();
      return space.wait();
    },
    whenEmpty() {
      if (cutReason) return Promise.reject(cutReason.reason);
      if (buffer.length === 0) return Promise.resolve();
      return empty.wait();
    },
    close() {
      end ??= "closed";
      serve();
    },
    fail(error) {
      end ??= { error };
      serve();
    },
    cut(reason) {
      if (cutReason) return;
      cutReason = { reason };
      buffer.length = 0;
      space.settle(reason);
      empty.settle(reason);
      serve();
    },
    reader: it,
  };
}
