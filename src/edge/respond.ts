import type { ServerResponse } from "node:http";
import { toHttpError, type HttpError } from "../errors/http.ts";
import type { ErrorLinks } from "../errors/envelope.ts";
import { noteReason } from "./access.ts";

/** Writes a body with its status and headers, then ends the response (see `finish`). */
function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  contentType: string,
  text: string,
  bodyUnread: boolean,
): void {
  res.writeHead(status, { ...headers, "content-type": contentType, "content-length": Buffer.byteLength(text) });
  res.write(text);
  finish(res, bodyUnread);
}

/** Writes a JSON body with its status and headers. */
export function writeJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  send(res, status, headers, "application/json", JSON.stringify(body), false);
}

/** How long a refused body is discarded so the client can read the refusal, before a hard close. */
const LINGER_MS = 2000;

/**
 * Ends a response. After a refusal made before the request body was (fully) read, the rest of
 * the body is discarded, never parsed or kept, and the response ends only when the client has
 * sent it all, or after LINGER_MS: ending at once would close a socket holding unread bytes,
 * which resets the connection and loses the answer the client is waiting for.
 */
function finish(res: ServerResponse, bodyUnread: boolean): void {
  const req = res.req;
  if (!bodyUnread || req.readableEnded) {
    res.end();
    return;
  }
  const timer = setTimeout(() => {
    res.end();
    req.socket.destroy();
  }, LINGER_MS);
  timer.unref();
  const done = () => {
    clearTimeout(timer);
    res.end();
  };
  req.once("end", done);
  req.once("close", done);
  req.resume();
}

/**
 * Writes an error response. `bodyUnread` marks a refusal made before the request body was
 * (fully) read; see `finish`.
 */
export function writeError(
  res: ServerResponse,
  error: HttpError,
  extra: Record<string, string>,
  bodyUnread: boolean,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (error.reason !== undefined) noteReason(res, error.reason);
  const headers = { ...extra, ...error.headers };
  if (typeof error.body === "string")
    send(res, error.status, headers, "text/plain; charset=utf-8", error.body, bodyUnread);
  else send(res, error.status, headers, "application/json", JSON.stringify(error.body), bodyUnread);
}

/** Maps a core error and writes it. */
export function writeCoreError(
  res: ServerResponse,
  err: unknown,
  links: ErrorLinks,
  extra: Record<string, string>,
  bodyUnread: boolean,
): void {
  writeError(res, toHttpError(err, links), extra, bodyUnread);
}
