/**
 * Batches the texts written in one turn of the event loop into one write. Each write to a
 * socket or a pipe is a syscall (and, for a stream, a chunk the other side must read), so the
 * hot paths that write many small texts per tick (log lines, SSE frames) write once a tick.
 * A batch never grows past `maxBytes`: a producer that never yields to the event loop is
 * written at once, and so still meets the destination's backpressure.
 */
export interface TickBatcher {
  push(text: string): void;
  /** Writes what is pending now. */
  flush(): void;
}

/** Builds a batcher over `write`; see `TickBatcher`. */
export function createTickBatcher(write: (text: string) => void, maxBytes: number): TickBatcher {
  let pending: string[] = [];
  let bytes = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.length === 1 ? (pending[0] ?? "") : pending.join("");
    pending = [];
    bytes = 0;
    write(text);
  };
  return {
    push(text) {
      pending.push(text);
      bytes += text.length;
      if (bytes >= maxBytes) return flush();
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
