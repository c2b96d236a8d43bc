import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as an OTLP/HTTP JSON export carries it, its attributes decoded to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  /** The `service.name` of the resource that sent it. */
  service: string;
}

/** An OTLP/HTTP receiver on a free port, as a collector would run one on 4318. */
export interface OtlpReceiver {
  /** The base URL to give as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests that were not `POST /v1/traces` with a JSON body. */
  rejected: number;
  close(): Promise<void>;
}

/** OTLP JSON's AnyValue: one of these keys is set. */
interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}
interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: KeyValue[];
      }>;
    }>;
  }>;
}

function decodeValue(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(decodeValue);
  return undefined;
}

const decodeAttributes = (kvs: KeyValue[] = []) => Object.fromEntries(kvs.map((kv) => [kv.key, decodeValue(kv.value)]));

/**
 * Starts a receiver that decodes what OpenTelemetry's OTLP/HTTP JSON exporter sends to
 * `/v1/traces` (ids as hex strings, times as nanosecond strings) into `spans`.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: OtlpReceiver = { url: "", spans: [], rejected: 0, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      if (req.method !== "POST" || req.url !== "/v1/traces" || !req.headers["content-type"]?.includes("json")) {
        received.rejected += 1;
        res.writeHead(400).end();
        return;
      }
      const request = JSON.parse(body) as ExportRequest;
      for (const rs of request.resourceSpans ?? []) {
        const service = String(decodeAttributes(rs.resource?.attributes)["service.name"] ?? "");
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            received.spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? "",
              name: s.name,
              kind: s.kind,
              startNs: BigInt(s.startTimeUnixNano),
              endNs: BigInt(s.endTimeUnixNano),
              attributes: decodeAttributes(s.attributes),
              service,
            });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  received.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  received.close = () => new Promise((resolve) => server.close(() => resolve()));
  return received;
}
