import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config/index.ts";
import { silentLogger } from "../src/logger.ts";
import { eventually } from "./support/envelopes.ts";
import { startFakeUpstream, type FakeUpstream } from "./support/fake-upstream.ts";
import { usageRecordsOf } from "./support/ledger.ts";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./support/otlp-receiver.ts";
import { startUpstreamApp, type UpstreamApp } from "./support/upstream-app.ts";

const SERVER = 2;
const CLIENT = 3;

/**
 * One streaming call through edge, core and upstream arrives at an OTLP/HTTP receiver as one
 * trace: the edge's span under the caller's `traceparent`, the core RPC's under the edge's,
 * the engine call's under the core's, and the upstream called with the engine span's
 * `traceparent`. Each span carries the GenAI attributes and ends when the stream ends.
 */
describe.each([
  { deployment: "one process (in-process transport)", split: false },
  { deployment: "an edge apart, reaching the core over gRPC", split: true },
])("traces over OTLP/HTTP, $deployment", ({ split }) => {
  let receiver: OtlpReceiver;
  let upstream: FakeUpstream;
  let app: UpstreamApp;
  let edge: App | undefined;
  let edgeUrl = "";
  const edgeService = split ? "sluice-edge" : "sluice-under-test";

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startFakeUpstream({ chunkDelayMs: 25 });
    app = await startUpstreamApp([{ name: "llama", baseUrl: upstream.url }], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "sluice-under-test" },
    });
    edgeUrl = app.edgeUrl;
    if (split) {
      const config = loadConfig({
        PORT: "0",
        METRICS_PORT: "0",
        HOST: "127.0.0.1",
        CORE_URL: app.coreUrl,
        SLUICE_LOG: "silent",
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: edgeService,
      });
      edge = await startApp(config, { logger: silentLogger });
      edgeUrl = edge.edgeUrl;
    }
  });
  afterAll(async () => {
    await edge?.close();
    await app?.close();
    await upstream?.stop();
    await receiver?.close();
  });

  it("links edge, core and engine spans in the caller's trace with GenAI attributes, to the stream's end", async () => {
    const { apiKey, accountId } = await app.newAccount();
    const traceId = randomBytes(16).toString("hex");
    const callerSpan = randomBytes(8).toString("hex");
    const res = await fetch(`${edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        traceparent: `00-${traceId}-${callerSpan}-01`,
      },
      body: JSON.stringify({
        model: "llama",
        stream: true,
        max_tokens: 20,
        messages: [{ role: "user", content: "Trace this call from end to end." }],
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body?.getReader();
    if (!reader) throw new Error("no body");
    const first = await reader.read();
    const firstAt = performance.now();
    let text = Buffer.from(first.value ?? new Uint8Array()).toString("utf8");
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString("utf8");
    const streamedMs = performance.now() - firstAt;
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(streamedMs).toBeGreaterThan(100);

    const mine = () => receiver.spans.filter((s) => s.traceId === traceId);
    const spans = await eventually(async () => {
      const found = mine();
      if (!found.some((s) => s.name === "POST /v1/chat/completions")) throw new Error("no edge span yet");
      return found;
    }, 10_000);
    const one = (name: string): ReceivedSpan => {
      const found = spans.filter((s) => s.name === name);
      expect(found, name).toHaveLength(1);
      return found[0] as ReceivedSpan;
    };
    const edgeSpan = one("POST /v1/chat/completions");
    const core = one("sluice.completion.v1.CompletionService/StreamChatCompletion");
    const check = one("sluice.identity.v1.IdentityService/CheckApiKey");
    const engine = one("chat llama");
    expect(receiver.rejected).toBe(0);
    expect(edgeSpan).toMatchObject({ kind: SERVER, parentSpanId: callerSpan, service: edgeService });
    expect(core).toMatchObject({ kind: SERVER, parentSpanId: edgeSpan.spanId, service: "sluice-under-test" });
    expect(check).toMatchObject({ kind: SERVER, parentSpanId: edgeSpan.spanId });
    expect(engine).toMatchObject({ kind: CLIENT, parentSpanId: core.spanId });
    // The model server was called with the engine span as its parent.
    const sent = upstream.requests.filter((r) => r.path === "/v1/chat/completions").at(-1);
    expect(sent?.headers.traceparent).toBe(`00-${traceId}-${engine.spanId}-01`);

    const [record] = await usageRecordsOf(app, accountId);
    if (!record) throw new Error("no usage record");
    const id = /"id":"(chatcmpl-[^"]+)"/.exec(text)?.[1];
    const genAi = {
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "llama",
      "gen_ai.usage.input_tokens": Number(record.promptTokens),
      "gen_ai.usage.output_tokens": Number(record.completionTokens),
      "gen_ai.response.id": id,
    };
    for (const span of [edgeSpan, core, engine]) {
      expect(span.attributes, span.name).toMatchObject(genAi);
      expect(span.attributes["gen_ai.response.finish_reasons"]).toEqual([expect.stringMatching(/^(stop|length)$/)]);
      // Each span lasted at least as long as the stream took from its first byte to its end.
      expect(Number(span.endNs - span.startNs) / 1e6, span.name).toBeGreaterThanOrEqual(streamedMs - 5);
    }
    expect(edgeSpan.attributes["http.response.status_code"]).toBe(200);
    expect(core.attributes["rpc.grpc.status_code"]).toBe(0);
  });
});
