import { SpanKind, trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { createTracing, extractContext, propagationHeaders, startSpan, tracingOff } from "./tracing.ts";

describe("createTracing", () => {
  it("is off, with no tracer, when no OTLP endpoint is set", async () => {
    const tracing = await createTracing({ serviceName: "sluice" });
    expect(tracing).toBe(tracingOff);
    expect(tracing.tracer).toBeUndefined();
  });

  it("makes a tracer whose spans continue a caller's traceparent and name themselves to the next hop", async () => {
    const tracing = await createTracing({ serviceName: "sluice", endpoint: "http://127.0.0.1:9/" });
    const tracer = tracing.tracer;
    if (!tracer) throw new Error("tracing is off");
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = extractContext({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    const span = startSpan(tracer, "edge", SpanKind.SERVER, parent);
    expect(span.spanContext().traceId).toBe(traceId);
    const headers = propagationHeaders(span);
    expect(headers.traceparent).toBe(`00-${traceId}-${span.spanContext().spanId}-01`);
    // The next hop reads it back as its parent.
    expect(trace.getSpanContext(extractContext(new Headers(headers)))?.spanId).toBe(span.spanContext().spanId);
    // Not ended: nothing is exported to the address, which nobody serves.
  });

  it("starts a new trace when the caller sends none, or a malformed one", async () => {
    const tracing = await createTracing({ serviceName: "sluice", tracesEndpoint: "http://127.0.0.1:9/v1/traces" });
    const tracer = tracing.tracer;
    if (!tracer) throw new Error("tracing is off");
    const span = startSpan(tracer, "edge", SpanKind.SERVER, extractContext({ traceparent: "00-zz-yy-01" }));
    expect(span.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(span.spanContext().traceId).not.toBe("0".repeat(32));
    // Not ended: nothing is exported to the address, which nobody serves.
  });
});
