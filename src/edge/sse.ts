import type { ServerResponse } from "node:http";

const EVENT_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;

/**
 * A Server-Sent Events writer that validates what it writes (event names, single-line
 * payloads), keeps an idle stream alive with `: keep-alive` comments, respects backpressure
 * (`drained`), and always ends the response through `close()`.
 */
export interface SseWriter {
  /** Sends the 200 and the stream headers, once. */
  open(headers: Record<string, string>): void;
  readonly opened: boolean;
  data(payload: object | "[DONE]"): void;
  event(name: string, payload: object): void;
  /** Sends a `: keep-alive` comment now. */
  keepAlive(): void;
  /** Whether the socket is full: the caller should wait for `drained` before producing more. */
  readonly full: boolean;
  /**
   * Resolves true once the client has taken what was written, or false when it took nothing
   * for `timeoutMs` (a reader that never reads) or the response closed.
   */
  drained(timeoutMs: number): Promise<boolean>;
  close(): void;
}

export function createSseWriter(res: ServerResponse, keepAliveMs: number): SseWriter {
  let opened = false;
  let full = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => keepAlive(), keepAliveMs);
  };
  const keepAlive = () => write(": keep-alive\n\n");
  const write = (frame: string) => {
    if (res.writableEnded || res.destroyed) return;
    if (!res.write(frame)) full = true;
    arm();
  };
  const line = (payload: object | "[DONE]") => {
    const text = payload === "[DONE]" ? payload : JSON.stringify(payload);
    if (/[\r\n]/.test(text)) throw new Error("SSE data must be a single line");
    return text;
  };
  return {
    get opened() {
      return opened;
    },
    open(headers) {
      if (opened) return;
      opened = true;
      res.writeHead(200, {
        ...headers,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
      });
      res.flushHeaders();
      arm();
    },
    data(payload) {
      write(`data: ${line(payload)}\n\n`);
    },
    keepAlive,
    get full() {
      return full && !res.destroyed;
    },
    drained(timeoutMs) {
      if (!full || res.destroyed) return Promise.resolve(!res.destroyed);
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean) => {
          clearTimeout(stuck);
          res.off("drain", onDrain);
          res.off("close", onClose);
          if (ok) full = false;
          resolve(ok);
        };
        const onDrain = () => done(true);
        const onClose = () => done(false);
        const stuck = setTimeout(() => done(false), timeoutMs);
        res.once("drain", onDrain);
        res.once("close", onClose);
      });
    },
    event(name, payload) {
      if (!EVENT_NAME.test(name)) throw new Error(`invalid SSE event name: ${name}`);
      write(`event: ${name}\ndata: ${line(payload)}\n\n`);
    },
    close() {
      clearTimeout(timer);
      if (!res.writableEnded) res.end();
    },
  };
}
