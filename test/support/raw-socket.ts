import { connect, type Socket } from "node:net";

/** A bare TCP connection to a test server, recording what it receives and when it is closed. */
export interface RawConnection {
  socket: Socket;
  /** Everything received so far, as latin1 text. */
  text(): string;
  /** Whether the server has ended or reset the connection. */
  isClosed(): boolean;
  /**
   * Resolves with everything received once the server ends or resets the connection; rejects
   * with `message` when that has not happened within `guardMs`.
   */
  closed(guardMs: number, message: string): Promise<string>;
  /** Resolves once the text received satisfies `done`; rejects with `message` after `guardMs` or on a close first. */
  receivedUntil(done: (text: string) => boolean, guardMs: number, message: string): Promise<string>;
}

/** Connects to the host and port of `url` and resolves once the TCP handshake is done. */
export function openRaw(url: string): Promise<RawConnection> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    let received = "";
    let ended = false;
    const listeners = new Set<() => void>();
    const notify = () => {
      for (const listener of [...listeners]) listener();
    };
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      received += d;
      notify();
    });
    // Either a FIN or a reset (ECONNRESET) means the server let the connection go.
    socket.on("end", () => {
      ended = true;
      notify();
    });
    socket.on("close", () => {
      ended = true;
      notify();
    });
    socket.on("error", () => undefined);
    const onConnectError = (err: Error) => reject(err);
    socket.once("error", onConnectError);
    const waitFor = (ready: () => boolean, guardMs: number, message: string, failOnClose: boolean) =>
      new Promise<string>((ok, fail) => {
        const check = () => {
          if (ready()) {
            done();
            ok(received);
          } else if (failOnClose && ended) {
            done();
            fail(new Error(`${message} (closed first, having received ${JSON.stringify(received)})`));
          }
        };
        const timer = setTimeout(() => {
          done();
          fail(new Error(`${message} (not within ${guardMs} ms; received ${JSON.stringify(received)})`));
        }, guardMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    socket.once("connect", () => {
      socket.off("error", onConnectError);
      resolve({
        socket,
        text: () => received,
        isClosed: () => ended,
        closed: (guardMs, message) => waitFor(() => ended, guardMs, message, false),
        receivedUntil: (done, guardMs, message) => waitFor(() => done(received), guardMs, message, true),
      });
    });
  });
}

/** The status code of the first HTTP/1.1 response in `text`, or undefined when none has begun. */
export function statusOf(text: string): number | undefined {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
  return match ? Number(match[1]) : undefined;
}

/** Whether `text` holds a whole HTTP/1.1 response with a `content-length` body. */
export function wholeResponse(text: string): boolean {
  const split = text.indexOf("\r\n\r\n");
  if (split < 0) return false;
  const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, split))?.[1];
  return length !== undefined && text.length - split - 4 >= Number(length);
}

/**
 * GETs `path` on a connection of its own (`Connection: close`, no pooling, so it never holds a
 * connection a test counts) and resolves with the status, or undefined when the server closed
 * the connection without an answer. Rejects when nothing happens within `guardMs`.
 */
export async function rawGet(url: string, path: string, guardMs = 5000): Promise<number | undefined> {
  const conn = await openRaw(url);
  conn.socket.write(`GET ${path} HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`);
  return statusOf(await conn.closed(guardMs, `GET ${path} got no answer and no close`));
}
