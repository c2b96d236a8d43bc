import type { IncomingMessage, ServerResponse } from "node:http";
import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http2";
import { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { sluiceError, UNAVAILABLE_RETRY_MS } from "../errors/catalogue.ts";
import { retryHeaders } from "../errors/http.ts";
import type { Logger } from "../logger.ts";

/**
 * The services a browser reaches on the public port, so the console calls the real RPCs
 * same-origin (no CORS). Chat stays on `/v1`: the completion service is not forwarded.
 */
export const PUBLIC_SERVICES = [
  "sluice.identity.v1.IdentityService",
  "sluice.billing.v1.BillingService",
  "sluice.admin.v1.AdminService",
] as const;

/** The one public service an operator may keep off the public port (`SLUICE_PUBLIC_ADMIN=off`). */
export const ADMIN_SERVICE: (typeof PUBLIC_SERVICES)[number] = "sluice.admin.v1.AdminService";

/** Headers that belong to one hop, never forwarded in either direction (RFC 9110 §7.6.1, RFC 9113 §8.2.2). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "host",
  "http2-settings",
  "x-request-id",
]);

/** Forwards Connect calls from the public port to the core, byte for byte. */
export interface ConnectProxy {
  /** Whether a request path names a method of a public service. */
  handles(path: string): boolean;
  /**
   * Sends the request to the core and streams its answer back. The core authenticates and
   * decides everything, through the same interceptors as any other caller.
   */
  forward(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>): void;
  close(): void;
}

/** Copies the headers of one side to the other, without pseudo-headers and hop-by-hop ones. */
function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name.startsWith(":") || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** A Connect unary error, built from the catalogue, for a core this edge cannot reach. */
function writeUnavailable(res: ServerResponse): void {
  const retryAfterMs = UNAVAILABLE_RETRY_MS;
  const error = sluiceError("service_unavailable", { message: "The core cannot be reached.", retryAfterMs });
  const body = errorToJsonBytes(error, {});
  res.writeHead(codeToHttpStatus(error.code), {
    "content-type": "application/json",
    "content-length": body.byteLength,
    ...retryHeaders(retryAfterMs),
  });
  res.end(body);
}

/**
 * A reverse proxy for the public services, over one HTTP/2 (h2c) session to the core at
 * `coreUrl`, reopened when it closes. It works the same in one process (the core's own port)
 * and in a split deployment (`CORE_URL`), and it buffers nothing: bodies flow with backpressure.
 */
export function createConnectProxy(deps: {
  coreUrl: string;
  logger: Logger;
  /** The services forwarded; all of `PUBLIC_SERVICES` unless the operator keeps Admin off this port. */
  services?: readonly string[];
}): ConnectProxy {
  const prefixes = (deps.services ?? PUBLIC_SERVICES).map((s) => `/${s}/`);
  let session: ClientHttp2Session | undefined;
  const connect = (): ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const opened = http2.connect(deps.coreUrl);
    opened.on("error", (err) => deps.logger.warn("core connection failed", { error: ConnectError.from(err).message }));
    opened.on("close", () => {
      if (session === opened) session = undefined;
    });
    // An idle session must not keep the process alive at shutdown.
    opened.unref();
    session = opened;
    return opened;
  };
  return {
    handles: (path) => prefixes.some((p) => path.startsWith(p) && path.length > p.length),
    forward(req, res, headers) {
      let upstream: http2.ClientHttp2Stream;
      try {
        upstream = connect().request({
          ...endToEnd(req.headers),
          ...headers,
          ":method": req.method ?? "POST",
          ":path": req.url ?? "/",
        });
      } catch {
        return writeUnavailable(res);
      }
      upstream.on("response", (h) => {
        res.writeHead(Number(h[":status"] ?? 502), endToEnd(h));
        upstream.pipe(res);
      });
      upstream.on("error", () => {
        if (!res.headersSent) writeUnavailable(res);
        else res.destroy();
      });
      // A caller that leaves cancels the core's call; it hears of it as any other cancel.
      res.on("close", () => {
        if (!upstream.closed) upstream.close(http2.constants.NGHTTP2_CANCEL);
      });
      req.pipe(upstream);
    },
    close() {
      session?.close();
      session = undefined;
    },
  };
}
