import { connect as h2connect, type ClientHttp2Session } from "node:http2";
import { connect } from "node:net";

/**
 * The three ways the fuzzer talks to Sluice: fetch for well-framed HTTP/1.1, a bare TCP socket
 * for what no HTTP client sends (CR/LF in headers, lying Content-Length, one byte per write,
 * hand-made chunked framing), and node:http2 with prior knowledge for the core's Connect port.
 * Each returns what came back, including a dropped connection, and never throws for it.
 */

/** A response as the fuzzer checks it: lower-cased header names, the body as bytes. */
export interface Reply {
  status: number;
  reason: string;
  headers: Array<[string, string]>;
  body: Buffer;
}

/** The value of a header (the first one), or undefined. */
export const header = (r: Reply, name: string): string | undefined => r.headers.find(([k]) => k === name)?.[1];

/** Sends one request with fetch; `body` undefined for a GET. */
export async function fetchExchange(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: Uint8Array | undefined; timeoutMs?: number },
): Promise<Reply> {
  const res = await fetch(url, {
    method: init.method,
    headers: init.headers,
    ...(init.body !== undefined && { body: init.body }),
    redirect: "manual",
    signal: AbortSignal.timeout(init.timeoutMs ?? 30_000),
  });
  const body = Buffer.from(await res.arrayBuffer());
  const headers: Array<[string, string]> = [];
  for (const [k, v] of res.headers) headers.push([k, v]);
  return { status: res.status, reason: res.statusText, headers, body };
}

/** What a raw exchange saw: complete responses in order, leftover bytes, and how it ended. */
export interface RawResult {
  replies: Reply[];
  /** Bytes after the last complete response (an unfinished one). */
  rest: Buffer;
  /** The server closed the connection (rather than the fuzzer, or a timeout). */
  closedByServer: boolean;
  timedOut: boolean;
}

/** Decodes a chunked body at `at`; undefined until it is complete. */
function dechunk(buf: Buffer, at: number): { body: Buffer; end: number } | undefined {
  const parts: Buffer[] = [];
  let i = at;
  for (;;) {
    const eol = buf.indexOf("\r\n", i, "latin1");
    if (eol < 0) return undefined;
    const size = Number.parseInt(buf.subarray(i, eol).toString("latin1"), 16);
    if (!Number.isFinite(size)) return undefined;
    if (size === 0) {
      const end = buf.indexOf("\r\n\r\n", eol, "latin1");
      return end < 0 ? undefined : { body: Buffer.concat(parts), end: end + 4 };
    }
    if (buf.length < eol + 2 + size + 2) return undefined;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}

/** Splits a byte stream into complete HTTP/1.1 responses; `closed` completes a body read to EOF. */
export function parseReplies(buf: Buffer, closed: boolean): { replies: Reply[]; rest: Buffer } {
  const replies: Reply[] = [];
  let at = 0;
  while (at < buf.length) {
    const headEnd = buf.indexOf("\r\n\r\n", at, "latin1");
    if (headEnd < 0) break;
    const [statusLine = "", ...lines] = buf.subarray(at, headEnd).toString("latin1").split("\r\n");
    const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(statusLine);
    if (!m) break;
    const headers = lines.map((l): [string, string] => [
      l.slice(0, l.indexOf(":")).trim().toLowerCase(),
      l.slice(l.indexOf(":") + 1).trim(),
    ]);
    const te = headers.find(([k]) => k === "transfer-encoding")?.[1];
    const cl = headers.find(([k]) => k === "content-length")?.[1];
    let body: Buffer;
    let end: number;
    if (te?.toLowerCase() === "chunked") {
      const d = dechunk(buf, headEnd + 4);
      if (!d) break;
      ({ body, end } = d);
    } else if (cl !== undefined) {
      end = headEnd + 4 + Number(cl);
      if (buf.length < end) break;
      body = buf.subarray(headEnd + 4, end);
    } else {
      if (!closed) break;
      body = buf.subarray(headEnd + 4);
      end = buf.length;
    }
    replies.push({ status: Number(m[1]), reason: m[2] ?? "", headers, body: Buffer.from(body) });
    at = end;
  }
  return { replies, rest: buf.subarray(at) };
}

/**
 * Writes `head` and then `body` to a fresh TCP connection, the body in one write or one byte
 * per write (Nagle off, each write flushed before the next). `finish: "end"` half-closes and
 * reads until the server closes; `"hold"` keeps the connection open and stops at the first
 * complete response, which is how a declared-but-unsent body is answered.
 */
export function rawExchange(
  port: number,
  plan: { head: Buffer; body: Buffer; writes: "whole" | "bytewise"; finish: "end" | "hold"; timeoutMs?: number },
): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    let closedByServer = false;
    let timedOut = false;
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parseReplies(received, closedByServer), closedByServer, timedOut });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      done();
    }, plan.timeoutMs ?? 30_000);
    socket.on("data", (d: Buffer) => {
      received = Buffer.concat([received, d]);
      if (plan.finish === "hold" && parseReplies(received, false).replies.length > 0) done();
    });
    socket.on("end", () => {
      closedByServer = true;
      done();
    });
    socket.on("error", () => {
      closedByServer = true;
      done();
    });
    socket.on("close", done);
    const write = (chunk: Buffer) =>
      new Promise<void>((ok) => {
        if (socket.destroyed) return ok();
        socket.write(chunk, () => ok());
      });
    void (async () => {
      if (plan.writes === "whole") {
        await write(Buffer.concat([plan.head, plan.body]));
      } else {
        await write(plan.head);
        for (let i = 0; i < plan.body.length && !socket.destroyed && !settled; i++)
          await write(plan.body.subarray(i, i + 1));
      }
      if (plan.finish === "end" && !socket.destroyed) socket.end();
    })();
  });
}

/** One HTTP/2 connection to the core, reopened when the server or an error closes it. */
export class H2Client {
  private session: ClientHttp2Session | undefined;
  private readonly url: string;
  /** Why the last session ended (a GOAWAY code or an error), for reports. */
  lastSessionEnd = "";
  constructor(url: string) {
    this.url = url;
  }

  private open(): ClientHttp2Session {
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;
    // Node's client counts the bodies of streams the server ended early against a 10 MB
    // session budget and then refuses new streams (ENHANCE_YOUR_CALM); a long run needs more.
    const session = h2connect(this.url, { maxSessionMemory: 4096 });
    session.on("error", (err) => {
      this.lastSessionEnd = `session error: ${err.message}`;
      session.destroy();
    });
    session.on("goaway", (code) => {
      this.lastSessionEnd = `GOAWAY ${code}`;
      session.close();
    });
    session.unref();
    this.session = session;
    return session;
  }

  /** Sends a unary POST and collects the response; a reset stream has status 0 and says why. */
  request(path: string, headers: Record<string, string>, body: Uint8Array, timeoutMs = 30_000): Promise<Reply> {
    return new Promise((resolve) => {
      const stream = this.open().request({ ":method": "POST", ":path": path, ...headers });
      const chunks: Buffer[] = [];
      const reply: Reply = { status: 0, reason: "", headers: [], body: Buffer.alloc(0) };
      const timer = setTimeout(() => {
        reply.reason = "timed out";
        stream.close();
      }, timeoutMs);
      stream.on("response", (h) => {
        reply.status = Number(h[":status"]);
        for (const [k, v] of Object.entries(h))
          if (!k.startsWith(":") && v !== undefined)
            reply.headers.push([k, Array.isArray(v) ? v.join(", ") : String(v)]);
      });
      stream.on("data", (d: Buffer) => chunks.push(d));
      stream.on("error", (err) => {
        reply.reason ||= `stream error: ${err.message}`;
      });
      stream.on("close", () => {
        clearTimeout(timer);
        reply.body = Buffer.concat(chunks);
        if (reply.status === 0) reply.reason = `${reply.reason} rst=${stream.rstCode} ${this.lastSessionEnd}`.trim();
        resolve(reply);
      });
      stream.end(body);
    });
  }

  close(): void {
    this.session?.close();
  }
}
