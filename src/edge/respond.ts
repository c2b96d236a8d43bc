import type { ServerResponse } from "node:http";
import { toHttpError, type HttpError } from "../errors/http.ts";
import type { ErrorLinks } from "../errors/catalogue.ts";

/** Writes a JSON body with its status and headers. */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/**
 * Writes an error response. `bodyUnread` marks a refusal made before the request body was
 * read: the connection is then closed after the answer instead of draining an unwanted body.
 */
export function writeError(res: ServerResponse, error: HttpError, extra: Record<string, string>, bodyUnread: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers = { ...extra, ...error.headers, ...(bodyUnread && { connection: "close" }) };
  if (typeof error.body === "string") {
    res.writeHead(error.status, { ...headers, "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(error.body) });
    res.end(error.body);
  } else {
    writeJson(res, error.status, error.body, headers);
  }
}

/** Maps a core error and writes it. */
export function writeCoreError(res: ServerResponse, err: unknown, links: ErrorLinks, extra: Record<string, string>, bodyUnread: boolean): void {
  writeError(res, toHttpError(err, links), extra, bodyUnread);
}
