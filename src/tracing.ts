import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  type SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

/**
 * Tracing with OpenTelemetry, on only when an OTLP endpoint is configured. Off, `tracer` is
 * undefined and every call site skips its span work behind one check, so tracing costs
 * nothing; the SDK and the exporter are not even loaded.
 */
export interface Tracing {
  readonly tracer: Tracer | undefined;
  /** Sends the spans still buffered, then stops; called at shutdown. */
  shutdown(): Promise<void>;
}

/** Where traces go: the standard OpenTelemetry settings. */
export interface TracingConfig {
  /** `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL; traces go to `<it>/v1/traces`. */
  endpoint?: string;
  /** `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full traces URL, used as is (wins over `endpoint`). */
  tracesEndpoint?: string;
  /** `OTEL_SERVICE_NAME`. */
  serviceName: string;
}

/** The tracing of a process whose tracing is off. */
export const tracingOff: Tracing = { tracer: undefined, shutdown: async () => undefined };

/**
 * Starts tracing when an endpoint is set: spans are batched and sent with the OTLP/HTTP
 * exporter (JSON over HTTP, which every collector accepts on port 4318). The provider is not
 * registered globally, so several apps in one process (tests) keep their own.
 */
export async function createTracing(config: TracingConfig): Promise<Tracing> {
  const url = config.tracesEndpoint ?? (config.endpoint && `${config.endpoint.replace(/\/+$/, "")}/v1/traces`);
  if (!url) return tracingOff;
  const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all(
    [
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
    ],
  );
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": config.serviceName }),
    // A collector that is down delays a shutdown by 5 s at most; its spans are then dropped.
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url, timeoutMillis: 5000 }),
        scheduledDelayMillis: 1000,
        exportTimeoutMillis: 5000,
      }),
    ],
  });
  return { tracer: provider.getTracer("sluice"), shutdown: () => provider.shutdown() };
}

const propagator = new W3CTraceContextPropagator();

/** Reads propagation headers from a fetch `Headers` or a Node header object. */
const headerGetter: TextMapGetter<Headers | Record<string, string | string[] | undefined>> = {
  keys: (carrier) => (carrier instanceof Headers ? [...carrier.keys()] : Object.keys(carrier)),
  get: (carrier, key) => (carrier instanceof Headers ? (carrier.get(key) ?? undefined) : carrier[key]),
};

/** The context a caller's `traceparent` (and `tracestate`) header names, or the root context. */
export function extractContext(headers: Headers | Record<string, string | string[] | undefined>): Context {
  return propagator.extract(ROOT_CONTEXT, headers, headerGetter);
}

/** The W3C headers (`traceparent`, `tracestate`) that make `span` the parent of the next hop's spans. */
export function propagationHeaders(span: Span): Record<string, string> {
  const out: Record<string, string> = {};
  propagator.inject(contextOf(span), out, {
    set: (carrier, key, value) => {
      carrier[key] = value;
    },
  });
  return out;
}

/** Starts a span of `kind` under `parent`. */
export function startSpan(
  tracer: Tracer,
  name: string,
  kind: SpanKind,
  parent: Context,
  attributes: Attributes = {},
): Span {
  return tracer.startSpan(name, { kind, attributes }, parent);
}

/** The context whose active span is `span`: the parent of its children. */
export const contextOf = (span: Span): Context => trace.setSpan(ROOT_CONTEXT, span);

/** Marks a span failed with a short description (a catalogue reason, never a message with data). */
export function markError(span: Span, errorType: string): void {
  span.setAttribute("error.type", errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, message: errorType });
}
