import type { RequestListener, Server } from "node:http";
import type { Http2Server, ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "../gen/grpc/health/v1/health_pb.ts";
import { CompletionService } from "../gen/sluice/completion/v1/completion_service_pb.ts";
import { IdentityService } from "../gen/sluice/identity/v1/identity_service_pb.ts";
import { ConfigError, type Config } from "./config/index.ts";
import { ADMIN_SERVICE, createConnectProxy, PUBLIC_SERVICES } from "./edge/connect-proxy.ts";
import { CONSOLE_DIST, loadConsoleAssets } from "./edge/console-assets.ts";
import { createErrorDocs } from "./edge/error-docs.ts";
import { createEdge } from "./edge/index.ts";
import { createExtractiveEngine } from "./engines/extractive/index.ts";
import { createOpenAIEngine } from "./engines/openai/index.ts";
import {
  BUILTIN_MODELS,
  createModelRegistry,
  loadModelsFile,
  ModelsFileError,
  type ModelEntry,
  type ModelRegistry,
} from "./engines/models.ts";
import { createTokenizer, type Tokenizer } from "./engines/tokenizer.ts";
import type { Logger } from "./logger.ts";
import { createMetrics, type Metrics } from "./metrics.ts";
import { metricsHandler, reportMetricsToPrimary } from "./metrics-server.ts";
import { createCoreHandler } from "./services/core-handler.ts";
import { createLocalTransport } from "./services/local-transport.ts";
import { createCore, type Core } from "./services/core.ts";
import { createLimitedH2cServer, createLimitedHttpServer, limitsOf } from "./server-limits.ts";
import { createMemoryStore } from "./store/memory/index.ts";
import { connectRedis, countCommands } from "./store/redis/client.ts";
import { createRedisStore } from "./store/redis/index.ts";
import { instrumentStore } from "./store/instrumented.ts";
import type { Store } from "./store/store.ts";
import { createTracing } from "./tracing.ts";
import { createWebhookDispatcher, type WebhookDispatcher } from "./webhooks/dispatcher.ts";

/** A running Sluice: its addresses, its store (for the dev bootstrap and tests), and a stop. */
export interface App {
  edgeUrl: string;
  /** The base of the console and of every error link (`SLUICE_PUBLIC_URL`, or this edge on localhost). */
  publicUrl: string;
  /** Where `/metrics` is served; empty in a cluster worker, whose primary serves them. */
  metricsUrl: string;
  /** Undefined for an edge-only process. */
  coreUrl: string | undefined;
  store: Store | undefined;
  close(): Promise<void>;
}

export interface AppOptions {
  logger: Logger;
  now?: () => number;
  /** A store to use instead of the one the config selects; tests share one across apps. */
  store?: Store;
  /** Models to serve instead of the configured ones; tests inject failing or slow engines. */
  models?: ModelRegistry;
  /** Where `apiKeyEnv` of the models file is looked up; the process environment by default. */
  env?: Record<string, string | undefined>;
  /**
   * A worker of `SLUICE_WORKERS`: it does not serve `METRICS_PORT` itself but answers the
   * primary, which serves the sum of every worker's metrics.
   */
  clusterWorker?: boolean;
}

function listen(server: Server | Http2Server, port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const { port: bound } = server.address() as AddressInfo;
      resolve(`http://${host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host}:${bound}`);
    });
  });
}

/** How long a shutdown waits, after the servers closed, for calls' last settle or release. */
const DRAIN_MS = 5000;

/** The largest request message the core reads: SPEC's 32 MiB body plus room for framing. */
const MAX_CORE_MESSAGE_BYTES = 33 * 1024 * 1024;

/** Tracks an h2c server's sessions, so a shutdown can send GOAWAY to each and, later, end them. */
function trackSessions(server: Http2Server): Set<ServerHttp2Session> {
  const sessions = new Set<ServerHttp2Session>();
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return sessions;
}

/**
 * Stops a server gracefully: no new connections, idle ones closed at once, calls in flight
 * (streams included) given `graceMs` to finish, then whatever is left is cut.
 */
async function closeServer(
  server: Server | Http2Server,
  graceMs: number,
  sessions?: Set<ServerHttp2Session>,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  if ("closeIdleConnections" in server) server.closeIdleConnections();
  for (const session of sessions ?? []) session.close();
  const cut = () => {
    if ("closeAllConnections" in server) server.closeAllConnections();
    for (const session of sessions ?? []) session.destroy();
  };
  const timer = setTimeout(cut, graceMs);
  if (graceMs <= 0) cut();
  await closed;
  clearTimeout(timer);
}

async function loadModels(
  config: Config,
  tokenizer: Tokenizer,
  logger: Logger,
  env: Record<string, string | undefined>,
  metrics: Metrics,
): Promise<ModelRegistry> {
  let entries: ModelEntry[] = BUILTIN_MODELS;
  if (config.SLUICE_MODELS !== undefined) entries = await loadModelsFile(config.SLUICE_MODELS);
  const extractive = createExtractiveEngine({ tokenizer });
  return createModelRegistry(entries, (entry) => {
    if (entry.engine === "extractive") return extractive;
    const apiKey = entry.apiKeyEnv === undefined ? undefined : env[entry.apiKeyEnv];
    if (entry.apiKeyEnv !== undefined && !apiKey) {
      throw new ModelsFileError(
        `SLUICE_MODELS: model "${entry.name}" reads its upstream key from ${entry.apiKeyEnv}, which is not set`,
      );
    }
    return createOpenAIEngine({
      model: entry.name,
      upstreamModel: entry.upstreamModel ?? entry.name,
      baseUrls: Array.isArray(entry.baseUrl) ? entry.baseUrl : [entry.baseUrl],
      ...(apiKey !== undefined && { apiKey }),
      tokenizer,
      timeouts: {
        connectMs: entry.connectTimeoutMs,
        firstByteMs: entry.firstByteTimeoutMs,
        idleMs: entry.idleTimeoutMs,
      },
      breaker: { failureThreshold: entry.breakerFailures, openMs: entry.breakerOpenMs },
      logger,
      onAttempt: metrics.upstream,
    });
  });
}

/**
 * An edge-only process first asks its core for the named key check (`CheckApiKey`), with no
 * key: a compatible core refuses it as `missing_bearer_token`. A core without that step would
 * make this edge charge every chat call's rate limit twice, so the edge refuses to start. A
 * core that cannot be reached yet is only logged: edges may start before their cores.
 */
async function checkCoreCompatible(transport: Transport, coreUrl: string, logger: Logger): Promise<void> {
  try {
    await createClient(IdentityService, transport).checkApiKey({}, { timeoutMs: 5000 });
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unimplemented) {
      throw new ConfigError(
        `CORE_URL: the core at ${coreUrl} does not serve sluice.identity.v1.IdentityService/CheckApiKey; ` +
          "upgrade it before this edge",
      );
    }
    if (e.code !== Code.Unauthenticated) logger.warn("core not reachable at start", { coreUrl, code: Code[e.code] });
  }
}

/** The memory store, or the shared Redis store when `REDIS_URL` is set. */
async function createStore(config: Config, metrics: Metrics, logger: Logger): Promise<Store> {
  if (config.REDIS_URL === undefined) return createMemoryStore();
  const options = { commandTimeoutMs: config.SLUICE_STORE_TIMEOUT_MS };
  const [redis, subscriber] = await Promise.all([
    connectRedis(config.REDIS_URL, options),
    connectRedis(config.REDIS_URL, options),
  ]);
  const store = createRedisStore({
    redis: countCommands(redis, metrics.redisCommand),
    subscriber,
    commandTimeoutMs: config.SLUICE_STORE_TIMEOUT_MS,
  });
  // Accounts made before the email index are found by email once this pass ends; a failed pass
  // runs again at the next start.
  void store.emailIndexBackfill.then((pass) => {
    if (pass.outcome === "done") logger.info("accounts indexed by email", { indexed: pass.indexed });
    if (pass.outcome === "failed") logger.warn("email index backfill failed; the next start retries it", {});
  });
  return store;
}

/** The tracing the config asks for: on when an OTLP endpoint is set. */
const tracingOf = (config: Config) =>
  createTracing({
    ...(config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined && { endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT }),
    ...(config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined && {
      tracesEndpoint: config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    }),
    serviceName: config.OTEL_SERVICE_NAME,
  });

/**
 * Builds and starts Sluice from a validated config: the core on `GRPC_PORT` (h2c gRPC,
 * Connect and gRPC-Web) and the HTTP edge on `PORT`, the edge reaching the core in-process
 * through the router transport, or over gRPC at `CORE_URL` when it runs alone.
 */
export async function startApp(config: Config, options: AppOptions): Promise<App> {
  const now = options.now ?? Date.now;
  const host = config.HOST ?? "0.0.0.0";
  const limits = limitsOf(config);
  /** Servers, closed first: no new calls, the grace period for calls in flight, then a cut. */
  const closers: Array<() => Promise<void>> = [];
  let core: Core | undefined;
  let closeEngines = async () => {};
  let transport: Transport;
  let coreUrl: string | undefined;
  let store: Store | undefined;
  let dispatcher: WebhookDispatcher | undefined;
  const metrics = createMetrics({ defaultMetrics: true });
  const tracing = await tracingOf(config);
  const tracer = tracing.tracer;

  if (config.CORE_URL === undefined) {
    store = instrumentStore(options.store ?? (await createStore(config, metrics, options.logger)), metrics.storeError);
    const tokenizer = createTokenizer();
    const env = options.env ?? process.env;
    const models = options.models ?? (await loadModels(config, tokenizer, options.logger, env, metrics));
    metrics.watchUpstreams(() => models.list().flatMap((m) => m.engine.upstreams?.() ?? []));
    closeEngines = async () => {
      await Promise.all(models.list().map((m) => m.engine.close?.()));
    };
    core = createCore({
      store,
      models,
      tokenizer,
      logger: options.logger,
      metrics,
      ...(tracer && { tracer }),
      now,
      reservationTtlMs: config.SLUICE_RESERVATION_TTL_MS,
      adminToken: config.SLUICE_ADMIN_TOKEN,
      maxCallsInFlight: config.SLUICE_MAX_CALLS_IN_FLIGHT,
      writeTimeoutMs: config.SLUICE_SSE_WRITE_TIMEOUT_MS,
      spendAlertPercents: config.SLUICE_SPEND_ALERT_THRESHOLDS,
    });
    // Every core process delivers spend alerts, whichever process raised them.
    dispatcher = createWebhookDispatcher({
      webhooks: store.webhooks,
      logger: options.logger,
      now,
      maxAttempts: config.SLUICE_WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: config.SLUICE_WEBHOOK_RETRY_BASE_MS,
      timeoutMs: config.SLUICE_WEBHOOK_TIMEOUT_MS,
      pollMs: config.SLUICE_WEBHOOK_POLL_MS,
    });
    // A request message is at most the 32 MiB body limit plus framing; Connect buffers no more,
    // and reads nothing of a keyed call's body before its key has been checked.
    const h2c = createLimitedH2cServer(
      createCoreHandler({
        ...core,
        readMaxBytes: MAX_CORE_MESSAGE_BYTES,
        logger: options.logger,
      }),
      limits,
    );
    const sessions = trackSessions(h2c);
    coreUrl = await listen(h2c, config.GRPC_PORT, host);
    closers.push(() => closeServer(h2c, config.SLUICE_SHUTDOWN_GRACE_MS, sessions));
    // In one process the edge reaches the core as objects, through the same interceptors.
    transport = createLocalTransport(core.routes, core.interceptors);
  } else {
    transport = createGrpcTransport({ baseUrl: config.CORE_URL });
    await checkCoreCompatible(transport, config.CORE_URL, options.logger);
  }

  // The edge's handler is made once the port is bound: the default public URL names that port.
  let handler: RequestListener = () => undefined;
  const edge = createLimitedHttpServer((req, res) => handler(req, res), limits);
  const edgeUrl = await listen(edge, config.PORT, host);
  closers.push(() => closeServer(edge, config.SLUICE_SHUTDOWN_GRACE_MS));
  const publicUrl = config.SLUICE_PUBLIC_URL ?? `http://localhost:${new URL(edgeUrl).port}`;
  const links = { publicUrl };
  // Console calls reach the core through the same port and interceptors as any other caller.
  const proxy = createConnectProxy({
    coreUrl: config.CORE_URL ?? (coreUrl as string),
    logger: options.logger,
    services: PUBLIC_SERVICES.filter((s) => config.SLUICE_PUBLIC_ADMIN === "on" || s !== ADMIN_SERVICE),
  });
  closers.push(async () => proxy.close());
  const consoleAssets = loadConsoleAssets();
  if (consoleAssets.files === 0) options.logger.warn("console not built: /console answers 503", { dir: CONSOLE_DIST });
  handler = createEdge({
    clients: {
      identity: createClient(IdentityService, transport),
      completion: createClient(CompletionService, transport),
      health: createClient(Health, transport),
    },
    links,
    keepAliveMs: config.SLUICE_SSE_KEEPALIVE_MS,
    writeTimeoutMs: config.SLUICE_SSE_WRITE_TIMEOUT_MS,
    logger: options.logger,
    metrics,
    ...(tracer && { tracer }),
    console: consoleAssets,
    docs: createErrorDocs(links),
    proxy,
  });

  // Metrics are served apart from the public port, so they are never exposed by accident; a
  // worker's are summed with its siblings' by the primary, which serves them.
  let metricsUrl = "";
  if (options.clusterWorker) reportMetricsToPrimary(metrics);
  else {
    const metricsServer = createLimitedHttpServer(metricsHandler(metrics.contentType, metrics.render), limits);
    metricsUrl = await listen(metricsServer, config.METRICS_PORT, host);
    closers.push(() => closeServer(metricsServer, 0));
  }

  return {
    edgeUrl,
    publicUrl,
    coreUrl,
    metricsUrl,
    store,
    async close() {
      await Promise.all(closers.map((c) => c()));
      // Cut calls end in a release, and a settle may still be chasing its outcome: give them
      // their last store step before the store goes.
      if (core && !(await core.calls.drain(DRAIN_MS)))
        options.logger.warn("calls still in flight at shutdown", { calls: core.calls.active });
      core?.calls.stop();
      await closeEngines();
      // Attempts in flight are cut and recorded for a retry (by any process) before the store goes.
      await dispatcher?.close();
      await store?.close();
      // The spans of the calls just ended are sent last.
      await tracing.shutdown().catch(() => undefined);
    },
  };
}
