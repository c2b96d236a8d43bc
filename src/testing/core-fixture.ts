import { createClient, createRouterTransport, type Client, type Transport } from "@connectrpc/connect";
import { AdminService, type Account } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { BillingService } from "../../gen/sluice/billing/v1/billing_service_pb.ts";
import { CompletionService } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { Engine } from "../engines/engine.ts";
import { BUILTIN_MODELS, createModelRegistry } from "../engines/models.ts";
import { createTokenizer } from "../engines/tokenizer.ts";
import { silentLogger } from "../logger.ts";
import { createCore, type Core, type CoreDeps } from "../services/core.ts";
import { createMemoryStore } from "../store/memory/index.ts";
import type { Store } from "../store/store.ts";
import { okEngine } from "./engines.ts";

/** The admin token of every test core, so suites can call the Admin API without configuring one. */
export const TEST_ADMIN_TOKEN = "admin-token-for-tests";

/** Call options that authenticate an Admin API call to a test core. */
export const ADMIN = { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } };

/**
 * What a test core is built from: any `CoreDeps` field overrides the test default (a memory
 * store, a silent logger, the wall clock, a 60 s reservation TTL, `TEST_ADMIN_TOKEN`; an
 * explicit `adminToken: undefined` turns the Admin API off), and `engine` serves the built-in
 * models when no `models` are given.
 */
export interface CoreFixtureDeps extends Partial<CoreDeps> {
  /** The engine behind the built-in `service-extract`, when `models` is not set; answers "ok" by default. */
  engine?: Engine;
}

/** What `newAccount` creates: the account, and the key's limits (the service's defaults when unset). */
export interface NewAccountOptions {
  /** The spend cap; `null` leaves the account without one. Default 10 USD. */
  capUsdMicros?: bigint | null;
  /** Default true. */
  onboarded?: boolean;
  rateLimitRps?: number;
  burst?: number;
  /** The key's own cap (`ApiKey.spend_cap_usd_micros`); unset, none. */
  spendCapUsdMicros?: bigint;
  /** The key's tokens-per-minute limit; unset, none. */
  tokensPerMinute?: number;
}

/** An account's API key, with the call options that present it. */
export interface TestKey {
  accountId: string;
  apiKeyId: string;
  secret: string;
  /** `Bearer <secret>`. */
  authorization: string;
  call: { headers: { authorization: string } };
}

/** A test core, its in-process transport, a client per service, and helpers to make accounts and keys. */
export interface CoreFixture {
  store: Store;
  core: Core;
  transport: Transport;
  admin: Client<typeof AdminService>;
  identity: Client<typeof IdentityService>;
  billing: Client<typeof BillingService>;
  completion: Client<typeof CompletionService>;
  /** Creates an account (onboarded, capped) and one API key on it. */
  newAccount(options?: NewAccountOptions): Promise<TestKey>;
  /** Creates one more API key on an existing account. */
  newKey(accountId: string, limits?: Omit<NewAccountOptions, "capUsdMicros" | "onboarded">): Promise<TestKey>;
  /** The account as the Admin API reads it (its period balance included). */
  account(accountId: string): Promise<Account | undefined>;
}

/**
 * Builds the whole core in process, behind Connect's router transport: the set-up every service
 * suite needs (store, models, core, transport, an account and a key), written once so that a
 * change to the core's dependencies is made here and not in every test file. No sockets are
 * opened and nothing needs closing, unless the test's own store does.
 */
export function createCoreFixture(deps: CoreFixtureDeps = {}): CoreFixture {
  const { engine = okEngine, ...overrides } = deps;
  const store = deps.store ?? createMemoryStore();
  const core = createCore({
    models: createModelRegistry(BUILTIN_MODELS, () => engine),
    tokenizer: createTokenizer(),
    logger: silentLogger,
    now: Date.now,
    reservationTtlMs: 60_000,
    adminToken: TEST_ADMIN_TOKEN,
    ...overrides,
    store,
  });
  const transport = createRouterTransport(core.routes, { router: { interceptors: core.interceptors } });
  const admin = createClient(AdminService, transport);

  const newKey: CoreFixture["newKey"] = async (accountId, limits = {}) => {
    const { secret, apiKey } = await admin.createApiKey({ accountId, ...limits }, ADMIN);
    const authorization = `Bearer ${secret}`;
    return { accountId, apiKeyId: apiKey?.id ?? "", secret, authorization, call: { headers: { authorization } } };
  };
  const newAccount: CoreFixture["newAccount"] = async (options = {}) => {
    const { capUsdMicros = 10_000_000n, onboarded = true, ...limits } = options;
    const { account } = await admin.createAccount(
      { onboardingComplete: onboarded, ...(capUsdMicros !== null && { spendCapUsdMicros: capUsdMicros }) },
      ADMIN,
    );
    return newKey(account?.id ?? "", limits);
  };

  return {
    store,
    core,
    transport,
    admin,
    identity: createClient(IdentityService, transport),
    billing: createClient(BillingService, transport),
    completion: createClient(CompletionService, transport),
    newAccount,
    newKey,
    account: async (accountId) => (await admin.getAccount({ accountId }, ADMIN)).account,
  };
}
