import { timingSafeEqual } from "node:crypto";
import { createContextKey, type ContextValues, type Interceptor } from "@connectrpc/connect";
import { sluiceError } from "../../errors/catalogue.ts";
import { parseBearer } from "../../protocol/bearer.ts";
import { acceptsSecret } from "../../store/key-secrets.ts";
import type { ApiKeyRecord, Store } from "../../store/store.ts";
import { callFactsKey } from "../request-context.ts";
import { hashApiKey, isWellFormedApiKey } from "./api-key.ts";
import { rateLimitHeaders } from "./rate-limit-headers.ts";

/** The authenticated caller of a keyed RPC, as handlers read it from the context. */
export interface Principal {
  accountId: string;
  apiKey: ApiKeyRecord;
}

/** Context value set by the caller interceptor; handlers of keyed services read it. */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "sluice principal" });

/**
 * A key check already started or done for a call, with the `Authorization` header it checked,
 * so the caller interceptor awaits it instead of looking the key up again: the core's handler
 * starts one from the headers before it reads a body (`createCoreHandler`), and in one process
 * the edge's `CheckApiKey` leaves one for the chat call that follows. Only server-side code can
 * set context values: over the wire they are made afresh for each call.
 */
export const keyCheck = createContextKey<{ authorization: string | null; key: Promise<ApiKeyRecord> } | undefined>(
  undefined,
  { description: "sluice key check" },
);

/**
 * Checks the API key of an `Authorization` header: 401 `missing_bearer_token` without a
 * bearer, 401 `invalid_api_key` for a malformed (checksum), unknown, revoked or expired key,
 * and for a secret a rotation replaced once its grace period has ended (`acceptsSecret`, by
 * `nowMs`: the clock decides on every call, so a cached key ends on time). It needs only the
 * headers, so the core runs it before it reads a body (DESIGN's check order).
 */
export async function checkApiKey(
  store: Store,
  authorization: string | null | undefined,
  nowMs: number,
): Promise<ApiKeyRecord> {
  const token = parseBearer(authorization);
  if (token === undefined) throw sluiceError("missing_bearer_token");
  if (!isWellFormedApiKey(token)) throw sluiceError("invalid_api_key");
  const hash = hashApiKey(token);
  const key = await store.findApiKeyByHash(hash);
  if (!key || !acceptsSecret(key, hash, nowMs)) throw sluiceError("invalid_api_key");
  return key;
}

/** Reads the principal or fails: a keyed handler reached without one is a wiring bug. */
export function requirePrincipal(values: ContextValues): Principal {
  const principal = values.get(principalKey);
  if (!principal) throw sluiceError("internal_error", { message: "no principal on a keyed call" });
  return principal;
}

/** Compares secrets in constant time (for equal lengths). */
function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface CallerAuthDeps {
  store: Store;
  now: () => number;
  /** Services whose calls need an API key. */
  services: ReadonlySet<string>;
  /**
   * Methods (`type.Name/Method`) that do not charge the rate limit here: chat calls, whose
   * handlers charge it in one store step with the reservation (still before any other rule
   * refuses the call), and `CheckApiKey`, the key check that comes before such a call.
   */
  unchargedHere: ReadonlySet<string>;
}

/**
 * Authenticates API keys and applies the per-key rate limit on every keyed RPC, so that
 * direct gRPC callers get exactly the guarantees of HTTP callers. Checks run in DESIGN's
 * order: missing bearer, invalid key, rate limit (for chat calls, the handler's first step).
 */
export function createCallerAuthInterceptor(deps: CallerAuthDeps): Interceptor {
  return (next) => async (req) => {
    if (!deps.services.has(req.service.typeName)) return next(req);
    const authorization = req.header.get("authorization");
    const known = req.contextValues.get(keyCheck);
    const check =
      known !== undefined && known.authorization === authorization
        ? known.key
        : checkApiKey(deps.store, authorization, deps.now());
    const key = await check;
    req.contextValues.set(keyCheck, { authorization, key: check });
    const facts = req.contextValues.get(callFactsKey);
    if (facts) {
      facts.accountId = key.accountId;
      facts.apiKeyId = key.id;
    }

    let headers: Record<string, string> | undefined;
    if (!deps.unchargedHere.has(`${req.service.typeName}/${req.method.name}`)) {
      const decision = await deps.store.chargeRateLimit({ key, nowMs: deps.now() });
      headers = rateLimitHeaders(decision);
      if (!decision.allowed)
        throw sluiceError("api_key_rate_limited", { retryAfterMs: decision.retryAfterMs, headers });
    }
    req.contextValues.set(principalKey, { accountId: key.accountId, apiKey: key });
    const res = await next(req);
    for (const [name, value] of Object.entries(headers ?? {})) res.header.set(name, value);
    return res;
  };
}

/**
 * Guards the Admin service with `SLUICE_ADMIN_TOKEN`. Without a token, Admin is off: every
 * call is refused rather than open.
 */
export function createAdminAuthInterceptor(deps: { adminToken: string | undefined; service: string }): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== deps.service) return next(req);
    if (deps.adminToken === undefined) throw sluiceError("admin_disabled");
    const token = parseBearer(req.header.get("authorization"));
    if (token === undefined || !safeEqual(token, deps.adminToken)) throw sluiceError("invalid_admin_token");
    return next(req);
  };
}
