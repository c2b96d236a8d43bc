import type { Client, ContextValues } from "@connectrpc/connect";
import type { Tracer } from "@opentelemetry/api";
import type { CallFacts } from "../call-facts.ts";
import type { Health } from "../../gen/grpc/health/v1/health_pb.ts";
import type { CompletionService } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { ErrorLinks } from "../errors/envelope.ts";
import type { ConnectProxy } from "./connect-proxy.ts";
import type { ConsoleAssets } from "./console-assets.ts";
import type { ErrorDocs } from "./error-docs.ts";
import { firstValue } from "../errors/http.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";

/** The core, as the edge sees it: Connect clients over whatever transport reaches it. */
export interface EdgeClients {
  identity: Client<typeof IdentityService>;
  completion: Client<typeof CompletionService>;
  health: Client<typeof Health>;
}

/** Everything the edge needs; it holds no store, no engine and no business rule. */
export interface EdgeDeps {
  clients: EdgeClients;
  links: ErrorLinks;
  keepAliveMs: number;
  /** A stream whose reader takes no bytes for this long is ended (the core then releases its hold). */
  writeTimeoutMs: number;
  logger: Logger;
  metrics?: Metrics;
  /** Set when tracing is on: each request is a server span, and the core hears of it by `traceparent`. */
  tracer?: Tracer;
  /** The console's files, served at `/console`. */
  console?: ConsoleAssets;
  /** The error pages, served at `/docs/errors`. */
  docs?: ErrorDocs;
  /** Forwards the public services' Connect calls (the console's) to the core. */
  proxy?: ConnectProxy;
}

/** Per-request values of one HTTP exchange. */
export interface EdgeRequest {
  requestId: string;
  /** The caller's Authorization header, forwarded verbatim to the core. */
  authorization: string | undefined;
  /**
   * Context values shared by this request's core calls: in one process the core remembers
   * the key its `CheckApiKey` checked, so the chat call does not look it up again. A gRPC
   * transport does not send them.
   */
  values: ContextValues;
  /** What the request learns of itself, for its access line, metrics and span. */
  facts: CallFacts;
  /** The W3C trace headers naming this request's span, sent with each core call; empty when tracing is off. */
  propagation: Record<string, string>;
}

/** The options of a keyed core call: its headers and the request's context values. */
export function coreCall(r: EdgeRequest): { headers: Record<string, string>; contextValues: ContextValues } {
  return { headers: coreHeaders(r), contextValues: r.values };
}

/** Headers every keyed call forwards to the core. */
export function coreHeaders(r: EdgeRequest): Record<string, string> {
  return {
    "x-request-id": r.requestId,
    ...r.propagation,
    ...(r.authorization !== undefined && { authorization: r.authorization }),
  };
}

/** Copies the rate-limit headers of a core response so HTTP callers see them too. */
export function rateLimitHeadersOf(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, key) => {
    if (key.startsWith("x-ratelimit-")) out[key] = firstValue(value);
  });
  return out;
}
