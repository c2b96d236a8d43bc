import type { ApiKeyRecord, Store } from "../store/store.ts";

/**
 * A key as stored, read by its id for a test's assertions. Nothing in the service reads a key
 * by id (calls find keys by hash), so the store has no such method: this reads the account's
 * list instead, which works on every backend.
 */
export async function readApiKey(store: Store, accountId: string, apiKeyId: string): Promise<ApiKeyRecord | undefined> {
  return (await store.listApiKeys(accountId)).find((k) => k.id === apiKeyId);
}
