import type { IncomingMessage, ServerResponse } from "node:http";
import { SpanKind } from "@opentelemetry/api";
import { accessFields, type CallFacts, genAiAttributes, startFacts } from "../call-facts.ts";
import { extractContext, markError, propagationHeaders, startSpan } from "../tracing.ts";
import type { EdgeDeps } from "./context.ts";

/** The catalogue reason each response answered with, written down where the error is written. */
const reasons = new WeakMap<ServerResponse, string>();

/** Notes the catalogue reason of the error `res` carries (an error response, or a stream's error event). */
export function noteReason(res: ServerResponse, reason: string): void {
  reasons.set(res, reason);
}

/** Routes whose access line is written at debug level: probes polled every few seconds. */
const QUIET = new Set(["/healthz", "/readyz"]);

/**
 * Starts the record of one HTTP exchange: its facts, its span when tracing is on (a child of
 * the caller's `traceparent`), and, once the response is over (a stream at its end, or a
 * client that left), its one access line, its metrics and the end of its span.
 */
export function startAccess(
  req: IncomingMessage,
  res: ServerResponse,
  deps: Pick<EdgeDeps, "logger" | "metrics" | "tracer">,
  route: string,
  requestId: string,
): { facts: CallFacts; propagation: Record<string, string> } {
  const facts = startFacts();
  const method = req.method ?? "";
  let propagation: Record<string, string> = {};
  if (deps.tracer) {
    facts.span = startSpan(deps.tracer, `${method} ${route}`, SpanKind.SERVER, extractContext(req.headers), {
      "http.request.method": method,
      "http.route": route,
      "url.path": (req.url ?? "/").split("?")[0] ?? "/",
    });
    propagation = propagationHeaders(facts.span);
  }
  res.once("close", () => {
    const ms = performance.now() - facts.startedAt;
    // A response that never got its head is a client that left first (nginx's 499); one cut
    // after its head keeps its status, and says why it did not finish.
    const status = res.headersSent ? res.statusCode : 499;
    const reason = reasons.get(res) ?? (res.writableFinished ? "" : "canceled");
    const line = {
      requestId,
      method,
      route,
      status,
      ...(reason && { code: reason }),
      durationMs: Math.round(ms * 10) / 10,
      ...accessFields(facts),
    };
    if (QUIET.has(route)) deps.logger.debug("http", line);
    else deps.logger.info("http", line);
    deps.metrics?.http(route, method, status, reason, ms / 1000);
    if (facts.span) {
      facts.span.setAttributes({ "http.response.status_code": status, ...genAiAttributes(facts) });
      if (status >= 500) markError(facts.span, reason || String(status));
      facts.span.end();
    }
  });
  return { facts, propagation };
}
