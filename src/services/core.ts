import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import type { Tracer } from "@opentelemetry/api";
import { Health } from "../../gen/grpc/health/v1/health_pb.ts";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { BillingService } from "../../gen/sluice/billing/v1/billing_service_pb.ts";
import { CompletionService } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { ModelRegistry } from "../engines/models.ts";
import type { Tokenizer } from "../engines/tokenizer.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { ApiKeyRecord, RateDecision, Store } from "../store/store.ts";
import { createAdminService } from "./admin/index.ts";
import { checkApiKey, createAdminAuthInterceptor, createCallerAuthInterceptor } from "./auth/index.ts";
import { createBillingService } from "./billing/index.ts";
import { createCallTracker, type CallTracker } from "./completion/call-tracker.ts";
import { createCompletionService } from "./completion/index.ts";
import { createHealthService } from "./health/index.ts";
import { createIdentityService } from "./identity/index.ts";
import { registerReflection } from "./reflection/index.ts";
import { createRequestContextInterceptor } from "./request-context.ts";

export interface CoreDeps {
  store: Store;
  models: ModelRegistry;
  tokenizer: Tokenizer;
  logger: Logger;
  metrics?: Metrics;
  /** Set when tracing is on (`OTEL_EXPORTER_OTLP_ENDPOINT`): RPCs and engine calls become spans. */
  tracer?: Tracer;
  now: () => number;
  reservationTtlMs: number;
  adminToken: string | undefined;
  /** Chat calls in flight at most (`SLUICE_MAX_CALLS_IN_FLIGHT`); default 10,000. */
  maxCallsInFlight?: number;
  /** How long a stream's reader may take nothing (`SLUICE_SSE_WRITE_TIMEOUT_MS`); default 30 s. */
  writeTimeoutMs?: number;
  /** How long a settle whose reply was lost is chased before its outcome is unknown; default 2 min. */
  resolveDeadlineMs?: number;
  /** The spend-alert thresholds, in percent of a cap (`SLUICE_SPEND_ALERT_THRESHOLDS`); none when unset. */
  spendAlertPercents?: readonly number[];
}

/** The core as the servers mount it. */
export interface Core {
  routes: (router: ConnectRouter) => void;
  interceptors: Interceptor[];
  ready: () => Promise<void>;
  /** The chat calls in flight, so a shutdown can wait for their last store step. */
  calls: CallTracker;
  /** Services whose calls need an API key, checked from the headers before a body is read. */
  keyed: ReadonlySet<string>;
  checkKey: (authorization: string | undefined) => Promise<ApiKeyRecord>;
  /** Charges a key's rate limit for a call refused before its handler ran. */
  chargeRateLimit: (key: ApiKeyRecord) => Promise<RateDecision>;
}

/** The services that need an API key. */
const KEYED = new Set([IdentityService.typeName, BillingService.typeName, CompletionService.typeName]);

/**
 * Calls the caller interceptor does not charge: chat calls charge the rate limit in the same
 * store step as their reservation, and `CheckApiKey` is the uncharged first step of one.
 */
const UNCHARGED_HERE = new Set([
  ...[CompletionService.method.createChatCompletion, CompletionService.method.streamChatCompletion].map(
    (m) => `${CompletionService.typeName}/${m.name}`,
  ),
  `${IdentityService.typeName}/${IdentityService.method.checkApiKey.name}`,
]);

/**
 * The whole core as Connect routes plus its interceptors, so the same core can be served on
 * the h2c port, mounted behind the in-process router transport, or tested without sockets.
 */
export function createCore(deps: CoreDeps): Core {
  const calls = createCallTracker(deps.maxCallsInFlight ?? 10_000);
  const callDeps = {
    ...deps,
    calls,
    writeTimeoutMs: deps.writeTimeoutMs ?? 30_000,
    resolveDeadlineMs: deps.resolveDeadlineMs ?? 120_000,
  };
  const ready = async () => {
    await deps.store.ping();
    await Promise.all(deps.models.list().map((m) => m.engine.ready()));
  };
  const routes = (router: ConnectRouter) => {
    router.service(IdentityService, createIdentityService(deps));
    router.service(BillingService, createBillingService(deps));
    router.service(CompletionService, createCompletionService(callDeps));
    router.service(AdminService, createAdminService(deps));
    router.service(Health, createHealthService({ ready }));
    registerReflection(router, [CompletionService, IdentityService, BillingService, AdminService, Health]);
  };
  const interceptors: Interceptor[] = [
    createRequestContextInterceptor({
      logger: deps.logger,
      ...(deps.metrics && { metrics: deps.metrics }),
      ...(deps.tracer && { tracer: deps.tracer }),
    }),
    createAdminAuthInterceptor({ adminToken: deps.adminToken, service: AdminService.typeName }),
    createCallerAuthInterceptor({
      store: deps.store,
      now: deps.now,
      services: KEYED,
      unchargedHere: UNCHARGED_HERE,
    }),
  ];
  return {
    routes,
    interceptors,
    ready,
    calls,
    keyed: KEYED,
    checkKey: (authorization) => checkApiKey(deps.store, authorization, deps.now()),
    chargeRateLimit: (key) => deps.store.chargeRateLimit({ key, nowMs: deps.now() }),
  };
}
