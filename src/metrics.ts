import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** What one finished chat call reports: the GenAI metrics and the spend, by model. */
export interface ChatObservation {
  model: string;
  /** The catalogue reason of a failed call (OpenTelemetry's `error.type`); undefined when it succeeded. */
  errorType?: string;
  seconds: number;
  /** Seconds to the first delta; undefined when none was produced. */
  ttftSeconds?: number;
  inputTokens: number;
  outputTokens: number;
  costUsdMicros: number;
}

/** How a reservation step ended; see `Metrics.reservation`. */
export type ReservationOutcome = "admitted" | "refused" | "extended" | "cut" | "settled" | "released";

/** A breaker's state as the gauge reports it: 0 closed, 1 half-open, 2 open. */
export type BreakerState = "closed" | "half-open" | "open";

/** One upstream's breaker, read at scrape time. */
export interface UpstreamHealth {
  upstream: string;
  breaker: BreakerState;
}

/**
 * The process's Prometheus metrics, on prom-client. Call sites report facts through these
 * methods and never touch prom-client, so the names, labels and buckets live in this one
 * module (and the README's metrics table, which a test checks against it).
 */
export interface Metrics {
  readonly registry: Registry;
  /** One finished HTTP exchange of the edge; `code` is the catalogue reason of an error, or "". */
  http(route: string, method: string, status: number, code: string, seconds: number): void;
  /** One finished RPC of the core, a stream at its end. */
  rpc(rpc: string, code: string, seconds: number): void;
  /** One finished chat call (unary or stream) of the core. */
  chat(o: ChatObservation): void;
  /** A call refused by its key's rate limit. */
  rateLimited(): void;
  /**
   * One reservation step: a call admitted with a hold or refused at the cap, a hold extended, a stream cut at the cap,
   * a hold settled or released.
   */
  reservation(outcome: ReservationOutcome): void;
  /** A stream opened (+1) or ended (-1); `role` is "edge" (SSE responses) or "core" (streaming RPCs). */
  streams(role: "edge" | "core", delta: 1 | -1): void;
  /** A store operation that failed; `reason` is its catalogue reason or "other". */
  storeError(op: string, reason: string): void;
  /** One attempt at an upstream model server and how it ended ("ok", "refused", "error"). */
  upstream(upstream: string, outcome: string, seconds: number): void;
  /** Reads the breakers at each scrape (the engines' upstreams). */
  watchUpstreams(read: () => UpstreamHealth[]): void;
  /** One command sent to Redis (one round trip; a Lua script is one). */
  redisCommand(): void;
  /** The exposition text of every metric. */
  render(): Promise<string>;
  readonly contentType: string;
}

/** Buckets for request durations, in seconds: a fast refusal to a long answer. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** OpenTelemetry GenAI's advised buckets for `gen_ai.server.request.duration`. */
const GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/** OpenTelemetry GenAI's advised buckets for `gen_ai.server.time_to_first_token`. */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** OpenTelemetry GenAI's advised buckets for `gen_ai.client.token.usage`. */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, "half-open": 1, open: 2 };

/**
 * Caches a metric's child per label values: prom-client hashes the label object on every
 * observation, and the chat path observes several per call.
 */
function children<T>(make: (...values: string[]) => T): (...values: string[]) => T {
  const cache = new Map<string, T>();
  return (...values) => {
    const key = values.join("\u0000");
    let child = cache.get(key);
    if (child === undefined) {
      child = make(...values);
      cache.set(key, child);
    }
    return child;
  };
}

/**
 * Builds an empty registry; one per process, passed to the edge and the core. With
 * `defaultMetrics`, Node's own (event loop lag, heap, GC, handles) are collected too.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });

  const http = new Histogram({
    name: "sluice_http_request_duration_seconds",
    help: "HTTP requests served by the edge, by route, method, status and error code, to the end of the response.",
    labelNames: ["route", "method", "status", "code"],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const rpc = new Histogram({
    name: "sluice_rpc_duration_seconds",
    help: "RPCs served by the core, by RPC and gRPC code; a stream to its end.",
    labelNames: ["rpc", "code"],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const genaiDuration = new Histogram({
    name: "gen_ai_server_request_duration_seconds",
    help: "OpenTelemetry GenAI: duration of chat calls, by model and error type.",
    labelNames: ["gen_ai_operation_name", "gen_ai_request_model", "error_type"],
    buckets: GENAI_DURATION_BUCKETS,
    registers,
  });
  const ttft = new Histogram({
    name: "gen_ai_server_time_to_first_token_seconds",
    help: "OpenTelemetry GenAI: time from the call's start to its first generated token, by model.",
    labelNames: ["gen_ai_operation_name", "gen_ai_request_model"],
    buckets: TTFT_BUCKETS,
    registers,
  });
  const tokenUsage = new Histogram({
    name: "gen_ai_client_token_usage",
    help: "OpenTelemetry GenAI: tokens per chat call, by model and type (input or output).",
    labelNames: ["gen_ai_operation_name", "gen_ai_request_model", "gen_ai_token_type"],
    buckets: TOKEN_BUCKETS,
    registers,
  });
  const tokens = new Counter({
    name: "sluice_tokens_total",
    help: "Tokens billed, by model and type (input or output).",
    labelNames: ["model", "type"],
    registers,
  });
  const spend = new Counter({
    name: "sluice_spend_usd_micros_total",
    help: "Spend billed, in micro-dollars, by model.",
    labelNames: ["model"],
    registers,
  });
  const rateLimited = new Counter({
    name: "sluice_rate_limited_total",
    help: "Calls refused by their key's rate limit (429 api_key_rate_limited).",
    registers,
  });
  const reservations = new Counter({
    name: "sluice_reservations_total",
    help:
      "Reservation steps, by outcome: admitted, refused (spend cap), extended, cut (a stream at the cap), " +
      "settled, released.",
    labelNames: ["outcome"],
    registers,
  });
  const streams = new Gauge({
    name: "sluice_active_streams",
    help: "Streams open now: SSE responses of the edge and streaming RPCs of the core.",
    labelNames: ["role"],
    registers,
  });
  const storeErrors = new Counter({
    name: "sluice_store_errors_total",
    help: "Store operations that failed, by operation and catalogue reason.",
    labelNames: ["op", "reason"],
    registers,
  });
  const upstreamDuration = new Histogram({
    name: "sluice_upstream_request_duration_seconds",
    help: "Attempts at upstream model servers, by upstream (model#index) and outcome, to the end of the answer.",
    labelNames: ["upstream", "outcome"],
    buckets: GENAI_DURATION_BUCKETS,
    registers,
  });
  const upstreamErrors = new Counter({
    name: "sluice_upstream_errors_total",
    help: "Attempts at upstream model servers that failed or were refused, by upstream and outcome.",
    labelNames: ["upstream", "outcome"],
    registers,
  });
  const readers: Array<() => UpstreamHealth[]> = [];
  new Gauge({
    name: "sluice_upstream_breaker_state",
    help: "Each upstream's circuit breaker: 0 closed, 1 half-open, 2 open.",
    labelNames: ["upstream"],
    registers,
    // Summed over workers the states would mean nothing: the worst one is reported.
    aggregator: "max",
    collect() {
      for (const read of readers) for (const u of read()) this.set({ upstream: u.upstream }, BREAKER_VALUE[u.breaker]);
    },
  });
  const redisCommands = new Counter({
    name: "sluice_redis_commands_total",
    help: "Commands sent to Redis (a Lua script counts once).",
    registers,
  });

  const httpOf = children((route, method, status, code) => http.labels(route, method, status, code));
  const rpcOf = children((name, code) => rpc.labels(name, code));
  const reservationOf = children((outcome) => reservations.labels(outcome));
  const streamsOf = children((role) => streams.labels(role));
  const genaiDurationOf = children((model, errorType) => genaiDuration.labels("chat", model, errorType));
  const ttftOf = children((model) => ttft.labels("chat", model));
  const tokenUsageOf = children((model, type) => tokenUsage.labels("chat", model, type));
  const tokensOf = children((model, type) => tokens.labels(model, type));
  const spendOf = children((model) => spend.labels(model));
  return {
    registry,
    contentType: registry.contentType,
    http: (route, method, status, code, seconds) => httpOf(route, method, String(status), code).observe(seconds),
    rpc: (name, code, seconds) => rpcOf(name, code).observe(seconds),
    chat(o) {
      genaiDurationOf(o.model, o.errorType ?? "").observe(o.seconds);
      if (o.ttftSeconds !== undefined) ttftOf(o.model).observe(o.ttftSeconds);
      if (o.inputTokens > 0 || o.outputTokens > 0) {
        tokenUsageOf(o.model, "input").observe(o.inputTokens);
        tokenUsageOf(o.model, "output").observe(o.outputTokens);
        tokensOf(o.model, "input").inc(o.inputTokens);
        tokensOf(o.model, "output").inc(o.outputTokens);
      }
      if (o.costUsdMicros > 0) spendOf(o.model).inc(o.costUsdMicros);
    },
    rateLimited: () => rateLimited.inc(),
    reservation: (outcome) => reservationOf(outcome).inc(),
    streams: (role, delta) => streamsOf(role).inc(delta),
    storeError: (op, reason) => storeErrors.labels(op, reason).inc(),
    upstream(upstream, outcome, seconds) {
      upstreamDuration.labels(upstream, outcome).observe(seconds);
      if (outcome !== "ok") upstreamErrors.labels(upstream, outcome).inc();
    },
    watchUpstreams: (read) => void readers.push(read),
    redisCommand: () => redisCommands.inc(),
    render: () => registry.metrics(),
  };
}
