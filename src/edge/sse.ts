import type { ServerResponse } from "node:http";
import { createTickBatcher } from "../tick-batcher.ts";

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

/**
 * The most a batch holds before it is written at once (node's default stream high-water mark), so
 * backpressure is met.
 */
const BATCH_BYTES = 16 * 1024;

/**
 * Builds a writer on `res`. Frames written in one turn of the event loop go out in one
 * `res.write` (one syscall and one chunk for the client, not one per delta), and the idle
 * timer is one timer per stream, not one per frame.
 */
export function createSseWriter(res: ServerResponse, keepAliveMs: number): SseWriter {
  let opened = false;
  let full = false;
  let timer: NodeJS.Timeout | undefined;
  let lastWriteMs = 0;
  const gone = () => res.writableEnded || res.destroyed;
  const batch = createTickBatcher((text) => {
    if (!gone() && !res.write(text)) full = true;
  }, BATCH_BYTES);
  /** Sends a keep-alive when the stream has been idle for keepAliveMs, checking again later otherwise. */
  const arm = (delayMs: number) => {
    timer = setTimeout(() => {
      const idle = performance.now() - lastWriteMs;
      if (idle >= keepAliveMs) keepAlive();
      else arm(keepAliveMs - idle);
    }, delayMs);
  };
  const write = (frame: string) => {
    if (gone()) return;
    lastWriteMs = performance.now();
    batch.push(frame);
  };
  const keepAlive = () => {
    write(": keep-alive\n\n");
    arm(keepAliveMs);
  };
  // JSON.stringify without indentation escapes every line break inside strings and puts none
  // between tokens, so an object's text is one line by construction: the per-frame scan for
  // line breaks it replaces showed in SSE profiles. A string payload is only "[DONE]".
  const line = (payload: object | "[DONE]") => (payload === "[DONE]" ? payload : JSON.stringify(payload));
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
      lastWriteMs = performance.now();
      arm(keepAliveMs);
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
      batch.flush();
      if (!res.writableEnded) res.end();
    },
  };
}
