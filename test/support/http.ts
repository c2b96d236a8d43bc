import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import type { TestApp } from "./harness.ts";

/** A finished HTTP exchange, with the body as text and, when it parses, as JSON. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/** A well-known short conversation the extractive engine answers deterministically. */
export const CHAT_MESSAGES = [
  {
    role: "system",
    content: "Rivers carry water to the sea. Mountains are tall and rocky. The desert is dry and hot.",
  },
  { role: "user", content: "Where do rivers carry water?" },
];

/** Parses text as JSON, or undefined. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** POSTs a chat completion with fetch; `body` may be a raw string. */
export async function postChat(
  app: TestApp,
  apiKey: string | undefined,
  body: unknown,
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Reply> {
  const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(apiKey !== undefined && { authorization: `Bearer ${apiKey}` }),
      ...init.headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(init.signal && { signal: init.signal }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: tryJson(text) };
}

/** The structured error envelope of SPEC, as received. */
export interface StructuredError {
  error: {
    type: string;
    code: string;
    reason: string;
    message: string;
    docs_url: string;
    resolution_url: string;
    portal_url: string;
  };
}

/** Narrows a JSON value to a record. */
export function asRecord(value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error(`not an object: ${JSON.stringify(value)}`);
  return value as Record<string, unknown>;
}

/** A raw node:http exchange: status, headers and body, or the socket error that ended it. */
export interface RawReply {
  status: number | undefined;
  headers: IncomingHttpHeaders;
  text: string;
  error: Error | undefined;
  /** How many body bytes the client managed to hand to the socket. */
  bytesSent: number;
}

/**
 * Sends a request with node:http so that the test controls framing: a declared
 * Content-Length that is never honoured, or a chunked body produced piece by piece.
 * `pump` writes the body; it gets a `stopped()` probe that turns true once a response (or an
 * error) has arrived, so a producer can stop writing.
 */
export function rawRequest(
  url: string,
  options: {
    method: string;
    path: string;
    headers: Record<string, string | number>;
    pump: (write: (chunk: Buffer) => Promise<boolean>, stopped: () => boolean) => Promise<void>;
    timeoutMs?: number;
  },
): Promise<RawReply> {
  const target = new URL(url);
  return new Promise((resolve) => {
    let settled = false;
    let stopped = false;
    let bytesSent = 0;
    const result: RawReply = { status: undefined, headers: {}, text: "", error: undefined, bytesSent: 0 };
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      result.bytesSent = bytesSent;
      resolve(result);
      req.destroy();
    };
    const timer = setTimeout(() => {
      result.error = new Error("timed out");
      finish();
    }, options.timeoutMs ?? 10_000);
    const req = httpRequest({
      host: target.hostname,
      port: target.port,
      method: options.method,
      path: options.path,
      headers: options.headers,
    });
    // Send the headers now: a server may answer from them alone, before any body byte.
    req.flushHeaders();
    req.on("response", (res) => {
      stopped = true;
      result.status = res.statusCode;
      result.headers = res.headers;
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        result.text += d;
      });
      res.on("end", finish);
      res.on("error", (err) => {
        result.error = err;
        finish();
      });
    });
    req.on("error", (err) => {
      stopped = true;
      result.error = err;
      // A response may already be in; give it a moment to finish.
      setTimeout(finish, 50);
    });
    const write = (chunk: Buffer) =>
      new Promise<boolean>((ok) => {
        if (stopped || req.destroyed) return ok(false);
        bytesSent += chunk.length;
        const flushed = req.write(chunk);
        if (flushed) return ok(true);
        const onDrain = () => {
          req.off("close", onClose);
          ok(true);
        };
        const onClose = () => {
          req.off("drain", onDrain);
          ok(false);
        };
        req.once("drain", onDrain);
        req.once("close", onClose);
      });
    options
      .pump(write, () => stopped)
      .then(
        () => {
          if (!stopped && !req.destroyed) req.end();
        },
        (err: unknown) => {
          result.error = err instanceof Error ? err : new Error(String(err));
          finish();
        },
      );
  });
}

/**
 * Sends a chunked request over a bare TCP socket and keeps writing `chunks` pieces of
 * `chunkBytes` until the server answers or closes. node:http's client drops a response that
 * arrives while it is still writing (it reports EPIPE instead), so an early 413 needs this.
 */
export function chunkedUpload(
  url: string,
  options: {
    path: string;
    headers: Record<string, string>;
    prefix: string;
    chunkBytes: number;
    chunks: number;
    timeoutMs?: number;
  },
): Promise<RawReply> {
  const target = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(target.port), target.hostname);
    let received = Buffer.alloc(0);
    let bytesSent = 0;
    let socketError: Error | undefined;
    const timer = setTimeout(() => {
      socketError = new Error("timed out");
      socket.destroy();
    }, options.timeoutMs ?? 15_000);
    socket.on("data", (d: Buffer) => {
      received = Buffer.concat([received, d]);
    });
    socket.on("error", (err) => {
      socketError = err;
    });
    socket.on("close", () => {
      clearTimeout(timer);
      const text = received.toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      const head = split >= 0 ? text.slice(0, split) : "";
      const [statusLine = "", ...lines] = head.split("\r\n");
      const status = /^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1];
      const headers: IncomingHttpHeaders = {};
      for (const line of lines) {
        const at = line.indexOf(":");
        if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
      }
      resolve({
        status: status === undefined ? undefined : Number(status),
        headers,
        text: split >= 0 ? text.slice(split + 4) : "",
        error: status === undefined ? socketError : undefined,
        bytesSent,
      });
    });
    const head = Object.entries({
      host: target.host,
      "transfer-encoding": "chunked",
      connection: "close",
      ...options.headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    const frame = (body: Buffer) => {
      bytesSent += body.length;
      socket.write(`${body.length.toString(16)}\r\n`);
      socket.write(body);
      return socket.write("\r\n");
    };
    const pump = async () => {
      socket.write(`POST ${options.path} HTTP/1.1\r\n${head}\r\n`);
      frame(Buffer.from(options.prefix));
      const piece = Buffer.alloc(options.chunkBytes, 0x61);
      for (let i = 0; i < options.chunks; i++) {
        if (socket.destroyed || received.length > 0) return;
        if (!frame(piece)) {
          await new Promise<void>((ok) => {
            const done = () => {
              socket.off("drain", done);
              socket.off("close", done);
              ok();
            };
            socket.on("drain", done);
            socket.on("close", done);
          });
        }
      }
      if (!socket.destroyed) socket.write("0\r\n\r\n");
    };
    void pump();
  });
}
