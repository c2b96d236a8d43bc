import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ApiKeyRecord, Store } from "../store/store.ts";

/**
 * An account's keys, revoked ones included, oldest first: the order both Admin's and Identity's
 * ListApiKeys promise (the store keeps none).
 * @throws `service_unavailable` (Redis).
 */
export async function listApiKeysOldestFirst(store: Store, accountId: string): Promise<ApiKeyRecord[]> {
  return (await store.listApiKeys(accountId)).sort((a, b) => a.createTimeMs - b.createTimeMs);
}

/**
 * A stored key in the shape the Admin and the Identity `ApiKey` share: never its hash, which
 * stays in the store (Admin adds the account id, which the key holder knows already).
 */
export function apiKeyToProto(k: ApiKeyRecord) {
  return {
    id: k.id,
    prefix: k.prefix,
    rateLimitRps: k.rateLimitRps,
    burst: k.burst,
    revoked: k.revoked,
    createTime: timestampFromMs(k.createTimeMs),
  };
}
