import { errors } from "undici";
import { reasonOf, sluiceError } from "../../errors/catalogue.ts";
import type { Logger } from "../../logger.ts";
import type { Engine, EngineEvent, EngineRequest } from "../engine.ts";
import type { Tokenizer } from "../tokenizer.ts";
import { upstreamBody } from "./request.ts";
import { parseUpstreamStream } from "./stream.ts";
import { createUpstreamPool, type Upstream } from "./upstream-pool.ts";

export interface OpenAIEngineOptions {
  /** The Sluice model name, for logs. */
  model: string;
  /** The model name the upstream knows. */
  upstreamModel: string;
  baseUrls: string[];
  /** Sent as `Authorization: Bearer`; never logged or returned. */
  apiKey?: string;
  tokenizer: Tokenizer;
  timeouts: { connectMs: number; firstByteMs: number; idleMs: number };
  breaker: { failureThreshold: number; openMs: number };
  logger: Logger;
  /**
   * Told how each attempt at an upstream ended ("ok", "refused", "error", "canceled") and how
   * long it took, to the end of its answer: the upstream latency and error metrics.
   */
  onAttempt?: (upstream: string, outcome: string, seconds: number) => void;
}

/** Upstream statuses that say "try another server": overload and server faults. */
const retryable = (status: number) => status === 429 || status >= 500;
/** Upstream statuses that say "this request is wrong": the caller's to fix. */
const callerFault = (status: number) => status === 400 || status === 413 || status === 422;

/** How long a caller is asked to wait when no upstream can take the call. */
const NO_UPSTREAM_RETRY_MS = 1000;

/** A short description of a failure for logs: an error class or a status, never a URL or body. */
function describe(err: unknown): string {
  if (err instanceof errors.UndiciError) return err.name;
  if (err instanceof Error) return err.name;
  return "unknown error";
}

/**
 * The `openai` engine: an OpenAI-compatible model server (vLLM, llama.cpp, Ollama, TGI,
 * OpenAI) behind a pooled keep-alive HTTP client. Before the first delta reaches the caller,
 * a connection error, a timeout, a 5xx or a 429 moves the call to another upstream; after
 * it, a failure ends the call (the core turns it into the internal-error event, unbilled).
 */
export function createOpenAIEngine(options: OpenAIEngineOptions): Engine {
  const pool = createUpstreamPool({
    model: options.model,
    baseUrls: options.baseUrls,
    connectTimeoutMs: options.timeouts.connectMs,
    breaker: options.breaker,
  });
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "text/event-stream",
    ...(options.apiKey !== undefined && { authorization: `Bearer ${options.apiKey}` }),
  };

  async function* attempt(
    upstream: Upstream,
    request: EngineRequest,
    signal: AbortSignal,
  ): AsyncGenerator<EngineEvent, "retry" | "done"> {
    const res = await upstream.pool.request({
      path: `${upstream.pathPrefix}/chat/completions`,
      method: "POST",
      // The request id and the trace context go on, so the model server's logs and spans join ours.
      headers:
        request.requestId === undefined && request.propagation === undefined
          ? headers
          : {
              ...headers,
              ...request.propagation,
              ...(request.requestId !== undefined && { "x-request-id": request.requestId }),
            },
      body: JSON.stringify(upstreamBody(request, options.upstreamModel)),
      signal,
      headersTimeout: options.timeouts.firstByteMs,
      bodyTimeout: options.timeouts.idleMs,
    });
    if (res.statusCode >= 400) {
      await res.body.dump().catch(() => undefined);
      options.logger.warn("upstream refused a call", {
        requestId: request.requestId,
        upstream: upstream.label,
        status: res.statusCode,
      });
      if (retryable(res.statusCode)) {
        upstream.breaker.failure();
        return "retry";
      }
      upstream.breaker.success();
      if (callerFault(res.statusCode))
        throw sluiceError("upstream_bad_request", { metadata: { upstream_status: String(res.statusCode) } });
      // 401, 403, 404...: the deployment is misconfigured, not the caller's request.
      throw sluiceError("service_unavailable", { retryAfterMs: NO_UPSTREAM_RETRY_MS });
    }
    yield* parseUpstreamStream(res.body, options.tokenizer, request.n ?? 1);
    return "done";
  }

  return {
    async *generate(request, signal) {
      const tried = new Set<Upstream>();
      for (;;) {
        const picked = pool.pick(tried);
        if (!picked) {
          throw sluiceError("service_unavailable", {
            retryAfterMs: NO_UPSTREAM_RETRY_MS,
            message: "No model server can take the call now. Back off and retry.",
          });
        }
        const { upstream, probe } = picked;
        tried.add(upstream);
        upstream.outstanding += 1;
        const started = performance.now();
        let outcome = "error";
        let delivered = false;
        // Whether this attempt told the breaker anything; a probe that did not frees its slot.
        let judged = false;
        try {
          const run = attempt(upstream, request, signal);
          for (;;) {
            const next = await run.next();
            if (next.done) {
              judged = true; // attempt() judged the refusal itself
              if (next.value === "done") {
                outcome = "ok";
                return;
              }
              outcome = "refused";
              break;
            }
            if (next.value.type === "done") {
              // The answer is whole: the caller may stop reading right after this event.
              upstream.breaker.success();
              judged = true;
              outcome = "ok";
            }
            delivered ||= next.value.type === "delta";
            yield next.value;
          }
        } catch (err) {
          if (signal.aborted) {
            outcome = "canceled";
            throw err;
          }
          if (reasonOf(err) !== undefined) {
            judged = true; // attempt() judged a refusal before throwing it
            outcome = "refused";
            throw err;
          }
          upstream.breaker.failure();
          judged = true;
          options.logger.warn("upstream call failed", {
            requestId: request.requestId,
            upstream: upstream.label,
            error: describe(err),
            afterFirstDelta: delivered,
          });
          // After the first delta no other upstream can take over: the model server failed the
          // call, which is a temporary unavailability (503), not a bug of Sluice's (500).
          if (delivered)
            throw sluiceError("service_unavailable", {
              retryAfterMs: NO_UPSTREAM_RETRY_MS,
              message: "The model server failed mid-answer. Back off and retry.",
            });
        } finally {
          options.onAttempt?.(upstream.label, outcome, (performance.now() - started) / 1000);
          upstream.outstanding -= 1;
          if (probe && !judged) upstream.breaker.release();
        }
      }
    },
    upstreams: () => pool.upstreams.map((u) => ({ upstream: u.label, breaker: u.breaker.state })),
    async ready() {
      if (!pool.anyAvailable()) throw new Error(`no upstream of ${options.model} is available`);
    },
    async close() {
      await pool.close();
    },
  };
}
