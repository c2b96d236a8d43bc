import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { workingPrevious } from "../store/key-secrets.ts";
import type { ApiKeyRecord, Balance, Store } from "../store/store.ts";
import { periodOf } from "./completion/pricing.ts";

/**
 * An account's keys, revoked ones included, oldest first: the order both Admin's and Identity's
 * ListApiKeys promise (the store keeps none).
 * @throws `service_unavailable` (Redis).
 */
async function listApiKeysOldestFirst(store: Store, accountId: string): Promise<ApiKeyRecord[]> {
  return (await store.listApiKeys(accountId)).sort((a, b) => a.createTimeMs - b.createTimeMs);
}

/**
 * What each key of an account has spent and holds in the period of `nowMs`, for the keys' listings
 * (a key missing from the map has spent and holds nothing).
 * @throws `service_unavailable` (Redis).
 */
export function keyBalancesNow(store: Store, accountId: string, nowMs: number): Promise<Map<string, Balance>> {
  return store.keyBalances({ accountId, period: periodOf(nowMs), nowMs });
}

/**
 * An account's keys, oldest first, each shown by `show` with what it spent and holds this period:
 * the one listing Admin's and Identity's ListApiKeys both answer with (two store reads at once).
 * @throws `service_unavailable` (Redis).
 */
export async function listApiKeysShown<T>(
  store: Store,
  accountId: string,
  nowMs: number,
  show: (key: ApiKeyRecord, nowMs: number, balance?: Balance) => T,
): Promise<T[]> {
  const [keys, balances] = await Promise.all([
    listApiKeysOldestFirst(store, accountId),
    keyBalancesNow(store, accountId, nowMs),
  ]);
  return keys.map((k) => show(k, nowMs, balances.get(k.id)));
}

/**
 * A stored key in the shape the Admin and the Identity `ApiKey` share: never its hashes, which
 * stay in the store (Admin adds the account id, which the key holder knows already). A secret a
 * rotation replaced shows only while it still works at `nowMs`, so both readers see how long it
 * has left and never a secret that is over. Its own limits show when set, and its spend and holds
 * in the current period (`balance`, from `keyBalancesNow`; none is 0 and 0) beside its cap.
 */
export function apiKeyToProto(k: ApiKeyRecord, nowMs: number, balance?: Balance) {
  const previous = workingPrevious(k, nowMs);
  return {
    id: k.id,
    prefix: k.prefix,
    rateLimitRps: k.rateLimitRps,
    burst: k.burst,
    revoked: k.revoked,
    createTime: timestampFromMs(k.createTimeMs),
    ...(k.expireTimeMs !== undefined && { expireTime: timestampFromMs(k.expireTimeMs) }),
    ...(previous && { previousPrefix: previous.prefix, previousExpireTime: timestampFromMs(previous.expireTimeMs) }),
    ...(k.spendCapUsdMicros !== undefined && { spendCapUsdMicros: BigInt(k.spendCapUsdMicros) }),
    spentUsdMicros: BigInt(balance?.spentUsdMicros ?? 0),
    reservedUsdMicros: BigInt(balance?.reservedUsdMicros ?? 0),
    ...(k.tokensPerMinute !== undefined && { tokensPerMinute: k.tokensPerMinute }),
  };
}
