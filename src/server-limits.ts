import { createServer, type RequestListener, type Server } from "node:http";
import {
  constants,
  createServer as createH2cServer,
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import type { Config } from "./config/index.ts";

/**
 * The limits every port enforces, so that slow, half-sent or idle connections cannot exhaust
 * file descriptors or memory: a bound on connections, on the time to send headers and a whole
 * request, on idle connections, and on streams per HTTP/2 connection.
 */
export interface ServerLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  maxStreamsPerConnection: number;
}

/** The limits of a validated config. */
export function limitsOf(config: Config): ServerLimits {
  return {
    headersTimeoutMs: Math.min(config.SLUICE_HEADERS_TIMEOUT_MS, config.SLUICE_REQUEST_TIMEOUT_MS),
    requestTimeoutMs: config.SLUICE_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: config.SLUICE_KEEPALIVE_TIMEOUT_MS,
    idleTimeoutMs: config.SLUICE_IDLE_TIMEOUT_MS,
    maxConnections: config.SLUICE_MAX_CONNECTIONS,
    maxStreamsPerConnection: config.SLUICE_MAX_STREAMS_PER_CONNECTION,
  };
}

/** How often node:http looks for requests past their header or request timeout. */
const TIMEOUT_CHECK_MS = 1000;

/** An HTTP/1.1 server (the edge, the metrics port) with the limits applied. */
export function createLimitedHttpServer(listener: RequestListener, limits: ServerLimits): Server {
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_MS,
    },
    listener,
  );
  server.maxConnections = limits.maxConnections;
  return server;
}

/**
 * The core's h2c server with the limits applied: a cap on connections and on concurrent
 * streams per connection, connections with no open stream closed after the idle timeout, and
 * a stream whose request is not whole within the request timeout reset (a half-sent call
 * holds nothing for long).
 */
export function createLimitedH2cServer(
  handler: (req: Http2ServerRequest, res: Http2ServerResponse) => void,
  limits: ServerLimits,
): Http2Server {
  const server = createH2cServer(
    {
      settings: { maxConcurrentStreams: limits.maxStreamsPerConnection },
      unknownProtocolTimeout: limits.headersTimeoutMs,
    },
    handler,
  );
  server.maxConnections = limits.maxConnections;
  // Not `server.setTimeout`: node then destroys a session after that long without a frame,
  // even while one of its calls is still being computed (a long unary answer sends nothing).
  // Only a session with no open stream is idle; it is closed with a GOAWAY.
  server.on("session", (session: ServerHttp2Session) => {
    let open = 0;
    session.on("stream", (stream: ServerHttp2Stream) => {
      open += 1;
      stream.once("close", () => {
        open -= 1;
      });
    });
    session.setTimeout(limits.idleTimeoutMs);
    session.on("timeout", () => {
      if (open === 0 && !session.closed) session.close();
    });
  });
  server.on("stream", (stream: ServerHttp2Stream) => {
    if (stream.readableEnded) return;
    const timer = setTimeout(() => {
      if (!stream.readableEnded && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
    }, limits.requestTimeoutMs);
    timer.unref();
    const clear = () => clearTimeout(timer);
    stream.once("end", clear);
    stream.once("close", clear);
  });
  return server;
}
