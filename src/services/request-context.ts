import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { reasonOf, sluiceError } from "../errors/catalogue.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { requestIdFrom } from "../protocol/request-id.ts";

/** The request id of the current call, as handlers read it from the context. */
export const requestIdKey = createContextKey<string>("", { description: "sluice request id" });

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

/**
 * The outermost interceptor: gives every call a request id (the caller's `x-request-id` when
 * it is safe, a new one otherwise), echoes it in the response, logs the outcome, and maps
 * unexpected failures to catalogue errors.
 */
export function createRequestContextInterceptor(deps: { logger: Logger; metrics?: Metrics }): Interceptor {
  return (next) => async (req) => {
    const given = req.header.get("x-request-id");
    const requestId = requestIdFrom(given);
    req.contextValues.set(requestIdKey, requestId);
    const rpc = `${req.service.typeName}/${req.method.name}`;
    const started = performance.now();
    let ended = false;
    /** Logs and counts the call once, at its end: a stream's end, not its first message. */
    const end = (code: string, reason?: string) => {
      if (ended) return;
      ended = true;
      const ms = performance.now() - started;
      deps.logger.info("rpc", { rpc, requestId, code, ...(reason !== undefined && { reason }), ms: Math.round(ms) });
      deps.metrics?.rpc(rpc, code, ms / 1000);
    };
    const fail = (err: unknown) => {
      const e = normalize(err, requestId, deps.logger, rpc, req.signal);
      end(Code[e.code], reasonOf(e));
      return e;
    };
    try {
      const res = await next(req);
      res.header.set("x-request-id", requestId);
      if (!res.stream) {
        end("OK");
        return res;
      }
      // A caller that leaves mid-stream may never pull the stream's end: its abort is the end.
      req.signal.addEventListener("abort", () => end(Code[Code.Canceled], "canceled"), { once: true });
      return { ...res, message: guardStream(res.message, fail, () => end("OK")) };
    } catch (err) {
      throw fail(err);
    }
  };
}
