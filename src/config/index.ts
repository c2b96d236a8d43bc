import { z } from "zod";

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

/**
 * Every setting of Sluice, read from the environment and checked at start-up, so that a bad
 * value stops the process with a message naming the variable instead of failing a call later.
 */
export const configSchema = z.object({
  PORT: port(8080).describe("HTTP edge port (the /v1 API, /healthz, /readyz)."),
  GRPC_PORT: port(50051).describe("Core port: gRPC, Connect and gRPC-Web over h2c."),
  METRICS_PORT: port(9464).describe("Prometheus /metrics port, never the public one."),
  HOST: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Address the servers bind; 0.0.0.0 when unset, " +
        "but 127.0.0.1 for a dev bootstrap that made up its own admin token.",
    ),
  SLUICE_ADMIN_TOKEN: z
    .string()
    .min(16, "must be at least 16 characters")
    .optional()
    .describe("Bearer token of the Admin API; unset turns Admin off (the dev bootstrap makes one up)."),
  SLUICE_MODELS: z
    .string()
    .min(1)
    .optional()
    .describe("Path of a JSON or YAML models file; unset serves only service-extract."),
  REDIS_URL: z
    .string()
    .regex(
      /^(rediss?|redis-sentinel|redis-cluster):\/\//,
      "must be a redis://, rediss://, redis-sentinel:// or redis-cluster:// URL",
    )
    .optional()
    .describe(
      "Shared Redis store: redis://, rediss://, redis-sentinel://s1,s2/primary or redis-cluster://n1,n2; " +
        "unset uses the in-process memory store.",
    ),
  CORE_URL: z
    .string()
    .url()
    .optional()
    .describe("Run as an edge only, reaching a remote core over gRPC at this URL (h2c: http://core:50051)."),
  SLUICE_DEV_BOOTSTRAP: z
    .enum(["auto", "off"])
    .default("auto")
    .describe("On an empty memory store, create a dev account and key and print them."),
  SLUICE_SSE_KEEPALIVE_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(15000)
    .describe("Idle time before a ': keep-alive' comment on a stream."),
  SLUICE_RESERVATION_TTL_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(60000)
    .describe("A reservation not renewed within this time expires (crashed processes)."),
  SLUICE_SHUTDOWN_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(10000)
    .describe("On SIGTERM, how long calls in flight (streams too) may finish before they are cut."),
  SLUICE_STORE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(50)
    .default(500)
    .describe("A store command with no answer within this fails the call with 503 and Retry-After (a stalled Redis)."),
  SLUICE_SSE_WRITE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(30000)
    .describe("A stream whose reader accepts no bytes for this long is ended, unbilled, and its hold released."),
  SLUICE_HEADERS_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(10000)
    .describe("Time a client has to send a request's headers, on every port."),
  SLUICE_REQUEST_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(60000)
    .describe("Time a client has to send a whole request (headers and body), on every port."),
  SLUICE_KEEPALIVE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(5000)
    .describe("An idle keep-alive HTTP/1.1 connection is closed after this."),
  SLUICE_IDLE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(300000)
    .describe("An HTTP/2 (core) connection with no open stream and no traffic is closed after this."),
  SLUICE_MAX_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(1)
    .default(10000)
    .describe("Open connections each port accepts; more are refused at once (keep ulimit -n above twice this)."),
  SLUICE_MAX_STREAMS_PER_CONNECTION: z.coerce
    .number()
    .int()
    .min(1)
    .default(100)
    .describe("Concurrent HTTP/2 streams (calls) one core connection may open."),
  SLUICE_MAX_CALLS_IN_FLIGHT: z.coerce
    .number()
    .int()
    .min(1)
    .default(10000)
    .describe("Chat calls one process runs at once; beyond it a call gets 503 with Retry-After, never a queue."),
  SLUICE_WORKERS: z
    .union([z.literal("auto"), z.coerce.number().int().min(1).max(256)])
    .default(1)
    .describe(
      "Processes serving the ports (node:cluster), with the Redis store or as an edge only: " +
        "a number, or auto for one per core. The memory store runs one process.",
    ),
  SLUICE_PUBLIC_URL: z
    .string()
    .url()
    .refine((u) => /^https?:$/.test(new URL(u).protocol), "must be an http or https URL")
    // The console and the docs are served at the root of the public port (/console, /docs).
    .refine((u) => new URL(u).pathname === "/" && !new URL(u).search, "must be an origin, with no path or query")
    .transform((u) => new URL(u).origin)
    .optional()
    .describe(
      "The URL callers reach Sluice at: the base of the console and of every error's docs_url, " +
        "resolution_url and portal_url. Default http://localhost:<PORT>.",
    ),
  SLUICE_PUBLIC_ADMIN: z
    .enum(["on", "off"])
    .default("on")
    .describe(
      "Whether the public port forwards the Admin API (the console's operator pages) to the core; " +
        "off keeps Admin on the core port only.",
    ),
  SLUICE_LOG: z
    .enum(["debug", "info", "warn", "error", "silent"])
    .default("info")
    .describe("Log level; logs are JSON lines on stderr (pino), one access line per HTTP request and per RPC."),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .string()
    .url()
    .optional()
    .describe(
      "OpenTelemetry collector base URL (http://collector:4318); " +
        "set, spans go to its /v1/traces over OTLP/HTTP (JSON). Unset, tracing is off.",
    ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .string()
    .url()
    .optional()
    .describe("Full OTLP/HTTP traces URL, used as is; wins over OTEL_EXPORTER_OTLP_ENDPOINT."),
  OTEL_SERVICE_NAME: z.string().min(1).default("sluice").describe("The service.name of the spans Sluice sends."),
  SLUICE_SPEND_ALERT_THRESHOLDS: z
    .string()
    .regex(/^(none|\d{1,3}(,\d{1,3})*)$/, 'must be "none" or whole percents separated by commas, such as 50,80,100')
    .transform((list) => (list === "none" ? [] : list.split(",").map(Number)))
    .refine((list) => list.every((p) => p >= 1 && p <= 100), "each percent must be from 1 to 100")
    .refine((list) => new Set(list).size === list.length, "a percent is listed twice")
    .transform((list) => list.sort((a, b) => a - b))
    .prefault("50,80,100")
    .describe(
      "Percents of a monthly cap (the account's, and a key's own) whose first crossing in a period " +
        "sends a spend.threshold_crossed webhook; none sends none.",
    ),
  SLUICE_WEBHOOK_MAX_ATTEMPTS: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(8)
    .describe("Attempts to deliver one webhook before its delivery is marked FAILED."),
  SLUICE_WEBHOOK_RETRY_BASE_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(30000)
    .describe("The wait before a webhook's second attempt; each later wait doubles it (±20% jitter)."),
  SLUICE_WEBHOOK_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(10000)
    .describe("A webhook attempt with no answer within this fails (and is retried)."),
  SLUICE_WEBHOOK_POLL_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(1000)
    .describe("How often each core process looks for webhooks to send that other processes queued, and for retries."),
});

export type Config = z.infer<typeof configSchema>;

/** Thrown with one line per bad variable. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Parses the environment; throws a `ConfigError` that names each bad variable. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const blanksRemoved = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = configSchema.safeParse(blanksRemoved);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => `  ${issue.path.join(".")}: ${issue.message}`);
  throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
}
