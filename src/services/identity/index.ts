import type { ServiceImpl } from "@connectrpc/connect";
import type { IdentityService } from "../../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { Store } from "../../store/store.ts";
import { apiKeyToProto, listApiKeysShown } from "../api-keys.ts";
import { requirePrincipal } from "../auth/index.ts";

/**
 * Who is calling. The interceptor has already authenticated the key, so this is the cheap
 * probe SPEC promises; `email` stays unset because the caller used an API key. `CheckApiKey`
 * is the same check without the rate limit, the named first step of a chat call. `ListApiKeys`
 * shows a key holder its account's keys (never their secrets), charged like `GetCaller`.
 */
export function createIdentityService(deps: { store: Store; now: () => number }): ServiceImpl<typeof IdentityService> {
  return {
    getCaller(_req, ctx) {
      const principal = requirePrincipal(ctx.values);
      return { id: principal.accountId, apiKeyId: principal.apiKey.id };
    },
    checkApiKey(_req, ctx) {
      const principal = requirePrincipal(ctx.values);
      return { accountId: principal.accountId, apiKeyId: principal.apiKey.id };
    },
    async listApiKeys(_req, ctx) {
      const { accountId } = requirePrincipal(ctx.values);
      return { apiKeys: await listApiKeysShown(deps.store, accountId, deps.now(), apiKeyToProto) };
    },
  };
}
