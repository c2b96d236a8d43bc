import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from "node:http2";

/** What came back on one raw HTTP/2 stream. */
export interface H2Reply {
  /** The response headers (`:status` included), or undefined when none came. */
  headers: IncomingHttpHeaders | undefined;
  /** The trailers, or undefined when none came (a trailers-only gRPC answer puts them in `headers`). */
  trailers: IncomingHttpHeaders | undefined;
  body: Buffer;
  /** Whether the response ended with END_STREAM (a whole answer), rather than only a reset. */
  ended: boolean;
  /** The RST_STREAM code the stream closed with, when it had closed (0 is NO_ERROR). */
  rstCode: number | undefined;
}

/** Opens a prior-knowledge h2c session to `url` and waits until it is connected. */
export function openH2c(url: string): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = connect(url);
    const onError = (err: Error) => reject(err);
    session.once("error", onError);
    session.once("connect", () => {
      session.off("error", onError);
      // An error after connecting (a reset by the server) is reported through the streams.
      session.on("error", () => undefined);
      resolve(session);
    });
  });
}

/** Resolves when `session` closes, or rejects with `message` after `guardMs`. */
export function sessionClosed(session: ClientHttp2Session, guardMs: number, message: string): Promise<void> {
  if (session.closed || session.destroyed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message)), guardMs);
    session.once("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Opens a stream on `session` with `headers`, writes `chunks`, and ends the request only when
 * `end` is set (a half-sent call otherwise). Resolves with the answer once the response has
 * ended or the stream has closed, whichever comes first; rejects with a message naming `label`
 * when neither happens within `guardMs` (the server waited on a body it should not read).
 * The stream is closed afterwards, so nothing is left open.
 */
export function h2Exchange(
  session: ClientHttp2Session,
  headers: OutgoingHttpHeaders,
  chunks: Buffer[],
  options: { end: boolean; guardMs: number; label: string },
): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const reply: H2Reply = {
      headers: undefined,
      trailers: undefined,
      body: Buffer.alloc(0),
      ended: false,
      rstCode: undefined,
    };
    const parts: Buffer[] = [];
    let settled = false;
    let stream: ClientHttp2Stream | undefined;
    const finish = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reply.body = Buffer.concat(parts);
      if (stream?.closed) reply.rstCode = stream.rstCode;
      if (stream && !stream.closed) stream.close();
      if (error) reject(error);
      else resolve(reply);
    };
    const timer = setTimeout(
      () =>
        finish(
          new Error(
            `${options.label}: no answer within ${options.guardMs} ms ` +
              "(the server is waiting for the rest of the request)",
          ),
        ),
      options.guardMs,
    );
    stream = session.request(headers, { endStream: false });
    stream.on("response", (h) => {
      reply.headers = h;
    });
    stream.on("trailers", (t) => {
      reply.trailers = t;
    });
    stream.on("data", (d: Buffer) => parts.push(d));
    stream.on("end", () => {
      // A reset also ends the readable side; only END_STREAM (or a NO_ERROR reset after it) is a whole answer.
      reply.ended = stream?.rstCode === undefined || stream.rstCode === constants.NGHTTP2_NO_ERROR;
      finish();
    });
    // A reset with an error code emits "error" before "close"; the code is read on close.
    stream.on("error", () => undefined);
    stream.on("close", () => finish());
    for (const chunk of chunks) stream.write(chunk);
    if (options.end) stream.end();
  });
}

/** A gRPC length-prefixed message header: uncompressed, announcing `length` bytes. */
export function grpcFrameHeader(length: number): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(length, 1);
  return header;
}
