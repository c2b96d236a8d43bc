import { type Span, SpanKind, type Tracer } from "@opentelemetry/api";
import { genAiAttributes, markFirstToken, startFacts, type CallFacts } from "../../call-facts.ts";
import type { EngineRequest } from "../../engines/engine.ts";
import type { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { finishName } from "../../protocol/finish-reason.ts";
import type { Metrics, ReservationOutcome } from "../../metrics.ts";
import { contextOf, markError, propagationHeaders, startSpan } from "../../tracing.ts";

/** What the observer of a call reads from the core. */
export interface ObserverDeps {
  metrics?: Metrics;
  tracer?: Tracer;
}

/**
 * What a chat call tells the outside world about itself as it runs: its facts for the RPC's
 * access line and span, its reservation steps for the metrics, and its engine call as a span
 * of its own. The call module reports events; this one knows where they go, so that billing
 * code does not grow telemetry code.
 */
export interface CallObserver {
  /** The call passed its rules: its model and completion id are known. */
  planned(model: string, responseId: string): void;
  /** A reservation step. */
  reservation(outcome: ReservationOutcome): void;
  /**
   * The engine is about to run: starts the engine span (a child of the RPC's) and returns the
   * request with the request id and the span's `traceparent` for the next hop.
   */
  engineStarting(request: EngineRequest): EngineRequest;
  /** A delta came from the engine. */
  token(): void;
  /** What the call was billed, and how its choices finished. */
  billed(promptTokens: number, completionTokens: number, costUsdMicros: number): void;
  finished(reasons: FinishReason[]): void;
  /** The engine loop ended; `errorType` is the catalogue reason when it failed. */
  engineEnded(errorType?: string): void;
}

/**
 * Builds the observer of one call. `facts` are the RPC's (from the request-context
 * interceptor); a call run outside one (a test) gets facts of its own.
 */
export function observeCall(deps: ObserverDeps, facts: CallFacts = startFacts(), requestId?: string): CallObserver {
  let span: Span | undefined;
  return {
    planned(model, responseId) {
      facts.model = model;
      facts.responseId = responseId;
    },
    reservation: (outcome) => deps.metrics?.reservation(outcome),
    engineStarting(request) {
      if (!deps.tracer || !facts.span) return requestId ? { ...request, requestId } : request;
      span = startSpan(deps.tracer, `chat ${request.model}`, SpanKind.CLIENT, contextOf(facts.span), {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.maxTokens,
      });
      return { ...request, ...(requestId && { requestId }), propagation: propagationHeaders(span) };
    },
    token: () => markFirstToken(facts),
    billed(promptTokens, completionTokens, costUsdMicros) {
      facts.promptTokens = promptTokens;
      facts.completionTokens = completionTokens;
      facts.costUsdMicros = costUsdMicros;
    },
    finished(reasons) {
      facts.finishReasons = reasons.map(finishName);
    },
    engineEnded(errorType) {
      if (!span) return;
      span.setAttributes(genAiAttributes(facts));
      if (errorType !== undefined && errorType !== "canceled") markError(span, errorType);
      span.end();
    },
  };
}
