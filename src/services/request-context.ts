import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { SpanKind, type Tracer } from "@opentelemetry/api";
import { accessFields, type CallFacts, genAiAttributes, startFacts } from "../call-facts.ts";
import { reasonOf, sluiceError, UNAVAILABLE_RETRY_MS } from "../errors/catalogue.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { requestIdFrom } from "../protocol/request-id.ts";
import { extractContext, markError, startSpan } from "../tracing.ts";

/** The request id of the current call, as handlers read it from the context. */
export const requestIdKey = createContextKey<string>("", { description: "sluice request id" });

/** The facts of the current call, which handlers fill in for its access line, metrics and span. */
export const callFactsKey = createContextKey<CallFacts | undefined>(undefined, { description: "sluice call facts" });

/**
 * Turns anything that is not a catalogue error into one, so that no stack trace or internal
 * message reaches a caller, and logs it with the request id so an operator can find it.
 */
function normalize(err: unknown, requestId: string, logger: Logger, rpc: string, signal: AbortSignal): ConnectError {
  // A caller that left (even before it sent its request) is a cancellation, whatever broke.
  if (signal.aborted && reasonOf(err) === undefined)
    return sluiceError("canceled", { headers: { "x-request-id": requestId } });
  if (reasonOf(err) !== undefined) {
    const e = err as ConnectError;
    e.metadata.set("x-request-id", requestId);
    return e;
  }
  const unavailable = err instanceof ConnectError && [Code.Unavailable, Code.DeadlineExceeded].includes(err.code);
  const canceled = err instanceof ConnectError && err.code === Code.Canceled;
  if (canceled) return err;
  logger.error("rpc failed", {
    rpc,
    requestId,
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
  });
  return sluiceError(unavailable ? "service_unavailable" : "internal_error", {
    headers: { "x-request-id": requestId },
    // Every 503 says when to come back, over gRPC and Connect (RetryInfo) as over HTTP.
    ...(unavailable && { retryAfterMs: UNAVAILABLE_RETRY_MS }),
    cause: err,
  });
}

/**
 * `messages` with its end reported to `onEnd` and its failure mapped by `onError`. Written as
 * an iterator rather than an async generator (`yield*`): every message of every stream passes
 * through it, and a generator's queue costs promises per message. A reader that stops early
 * (its `return`) reaches the messages' own `return`, as with `yield*`.
 */
function guardStream<T>(
  messages: AsyncIterable<T>,
  onError: (err: unknown) => ConnectError,
  onEnd: () => void,
): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = messages[Symbol.asyncIterator]();
      let over = false;
      return {
        async next() {
          if (over) return { done: true, value: undefined };
          let step: IteratorResult<T>;
          try {
            step = await it.next();
          } catch (err) {
            over = true;
            throw onError(err);
          }
          if (step.done === true) {
            over = true;
            onEnd();
            return { done: true, value: undefined };
          }
          return step;
        },
        async return() {
          if (!over) {
            over = true;
            try {
              await it.return?.();
            } catch (err) {
              throw onError(err);
            }
          }
          return { done: true, value: undefined };
        },
      };
    },
  };
}

/** The deps of the request-context interceptor: where lines, metrics and spans go. */
export interface RequestContextDeps {
  logger: Logger;
  metrics?: Metrics;
  /** Set when tracing is on; each RPC is then a server span, child of the caller's `traceparent`. */
  tracer?: Tracer;
}

/** RPCs whose access line is written at debug level: health probes, polled every few seconds. */
const QUIET = new Set(["grpc.health.v1.Health/Check", "grpc.health.v1.Health/Watch"]);

/**
 * The outermost interceptor: gives every call a request id (the caller's `x-request-id` when
 * it is safe, a new one otherwise) and its facts (`callFactsKey`, filled by the handlers),
 * echoes the id in the response, maps unexpected failures to catalogue errors, and at the
 * call's end (a stream's end, not its first message) writes its one access line, its metrics
 * and its span, all from the same facts.
 */
export function createRequestContextInterceptor(deps: RequestContextDeps): Interceptor {
  const { logger, metrics, tracer } = deps;
  return (next) => async (req) => {
    const requestId = requestIdFrom(req.header.get("x-request-id"));
    req.contextValues.set(requestIdKey, requestId);
    const facts = startFacts();
    req.contextValues.set(callFactsKey, facts);
    const rpc = `${req.service.typeName}/${req.method.name}`;
    if (tracer) {
      facts.span = startSpan(tracer, rpc, SpanKind.SERVER, extractContext(req.header), {
        "rpc.system": "grpc",
        "rpc.service": req.service.typeName,
        "rpc.method": req.method.name,
      });
    }
    let ended = false;
    let streaming = false;
    /** Logs, counts and traces the call once, at its end. */
    const end = (code: Code | 0, reason?: string) => {
      if (ended) return;
      ended = true;
      const ms = performance.now() - facts.startedAt;
      const codeName = code === 0 ? "OK" : Code[code];
      const line = {
        requestId,
        rpc,
        code: codeName,
        ...(reason !== undefined && { reason }),
        durationMs: Math.round(ms * 10) / 10,
        ...accessFields(facts),
      };
      if (QUIET.has(rpc)) logger.debug("rpc", line);
      else logger.info("rpc", line);
      if (metrics) {
        metrics.rpc(rpc, codeName, ms / 1000);
        if (reason === "api_key_rate_limited") metrics.rateLimited();
        if (streaming) metrics.streams("core", -1);
        if (facts.model !== undefined) {
          metrics.chat({
            model: facts.model,
            ...(reason !== undefined && { errorType: reason }),
            seconds: ms / 1000,
            ...(facts.ttftMs !== undefined && { ttftSeconds: facts.ttftMs / 1000 }),
            inputTokens: facts.promptTokens ?? 0,
            outputTokens: facts.completionTokens ?? 0,
            costUsdMicros: facts.costUsdMicros ?? 0,
          });
        }
      }
      if (facts.span) {
        facts.span.setAttributes({ "rpc.grpc.status_code": code, ...genAiAttributes(facts) });
        if (reason !== undefined && reason !== "canceled") markError(facts.span, reason);
        facts.span.end();
      }
    };
    const fail = (err: unknown) => {
      const e = normalize(err, requestId, logger, rpc, req.signal);
      end(e.code, reasonOf(e));
      return e;
    };
    try {
      const res = await next(req);
      res.header.set("x-request-id", requestId);
      if (!res.stream) {
        end(0);
        return res;
      }
      streaming = true;
      metrics?.streams("core", 1);
      // A caller that leaves mid-stream may never pull the stream's end: its abort is the end.
      req.signal.addEventListener("abort", () => end(Code.Canceled, "canceled"), { once: true });
      return { ...res, message: guardStream(res.message, fail, () => end(0)) };
    } catch (err) {
      throw fail(err);
    }
  };
}
