import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.ts";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { BillingService } from "../../gen/sluice/billing/v1/billing_service_pb.ts";
import { CompletionService } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { ModelRegistry } from "../engines/models.ts";
import type { Tokenizer } from "../engines/tokenizer.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { Store } from "../store/store.ts";
import { createAdminService } from "./admin/index.ts";
import { createAdminAuthInterceptor, createCallerAuthInterceptor } from "./auth/index.ts";
import { createBillingService } from "./billing/index.ts";
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
  now: () => number;
  reservationTtlMs: number;
  adminToken: string | undefined;
  /** The trusted edge's secret; see `createCallerAuthInterceptor`. */
  edgeToken: string | undefined;
}

/** The services that need an API key. */
const KEYED = new Set([IdentityService.typeName, BillingService.typeName, CompletionService.typeName]);

/** Chat calls charge the rate limit in the same store step as their reservation. */
const ADMIT_IN_HANDLER = new Set(
  [CompletionService.method.createChatCompletion, CompletionService.method.streamChatCompletion].map((m) => `${CompletionService.typeName}/${m.name}`),
);

/**
 * The whole core as Connect routes plus its interceptors, so the same core can be served on
 * the h2c port, mounted behind the in-process router transport, or tested without sockets.
 */
export function createCore(deps: CoreDeps): { routes: (router: ConnectRouter) => void; interceptors: Interceptor[]; ready: () => Promise<void> } {
  const ready = async () => {
    await deps.store.ping();
    await Promise.all(deps.models.list().map((m) => m.engine.ready()));
  };
  const routes = (router: ConnectRouter) => {
    router.service(IdentityService, createIdentityService());
    router.service(BillingService, createBillingService(deps));
    router.service(CompletionService, createCompletionService(deps));
    router.service(AdminService, createAdminService(deps));
    router.service(Health, createHealthService({ ready }));
    registerReflection(router, [CompletionService, IdentityService, BillingService, AdminService, Health]);
  };
  const interceptors: Interceptor[] = [
    createRequestContextInterceptor({ logger: deps.logger, ...(deps.metrics && { metrics: deps.metrics }) }),
    createAdminAuthInterceptor({ adminToken: deps.adminToken, service: AdminService.typeName }),
    createCallerAuthInterceptor({
      store: deps.store, now: deps.now, services: KEYED, admitInHandler: ADMIT_IN_HANDLER,
      ...(deps.edgeToken !== undefined && { edgeToken: deps.edgeToken }),
    }),
  ];
  return { routes, interceptors, ready };
}
