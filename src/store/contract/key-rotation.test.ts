import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { readApiKey } from "../../testing/store-reads.ts";
import { acceptsSecret, workingPrevious } from "../key-secrets.ts";
import type { ApiKeyRecord, RotateApiKeyRequest, Store } from "../store.ts";
import { apiKey, contractBackends, type MakeStore, NOW, withAccount } from "./support.ts";

/** A secret's stored form: hex like a real SHA-256, since keys compare hashes as hex. */
const newHash = () => randomBytes(32).toString("hex");

/** Whether `store` lets the secret hashing to `hash` in at `nowMs`: found by its hash, then accepted. */
async function works(store: Store, hash: string, nowMs: number): Promise<boolean> {
  const key = await store.findApiKeyByHash(hash);
  return key !== undefined && acceptsSecret(key, hash, nowMs);
}

/** A store with one account and one key on it (hex hash), and a way to rotate that key. */
async function withKey(makeStore: MakeStore, overrides: Partial<ApiKeyRecord> = {}) {
  const { store, acc } = await withAccount(makeStore);
  const key = apiKey(acc.id, { hash: newHash(), rateLimitRps: 2, burst: 3, ...overrides });
  await store.createApiKey(key);
  const rotate = (gracePeriodMs: number, extra: Partial<RotateApiKeyRequest> = {}) => {
    const hash = newHash();
    const request = { apiKeyId: key.id, hash, prefix: `svc_sk_${hash.slice(0, 6)}`, gracePeriodMs, nowMs: NOW };
    return { hash, rotation: store.rotateApiKey({ ...request, ...extra }) };
  };
  return { store, acc, key, rotate };
}

describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("rotateApiKey", () => {
    it("keeps the key's id, account, limits, creation and rate-limit state; only the secret changes", async () => {
      const { store, acc, key, rotate } = await withKey(makeStore);
      const charge = () => store.chargeRateLimit({ key, nowMs: NOW });
      for (let i = 0; i < key.burst; i++) expect((await charge()).allowed).toBe(true);
      const { hash, rotation } = rotate(60_000);
      const rotated = await rotation;
      const expected: ApiKeyRecord = {
        ...key,
        hash,
        prefix: `svc_sk_${hash.slice(0, 6)}`,
        previous: { hash: key.hash, prefix: key.prefix, expireTimeMs: NOW + 60_000 },
      };
      expect(rotated).toEqual({ outcome: "rotated", key: expected });
      expect(await store.findApiKeyByHash(hash)).toEqual(expected);
      expect(await store.findApiKeyByHash(key.hash)).toEqual(expected);
      expect(await readApiKey(store, acc.id, key.id)).toEqual(expected);
      expect((await store.listApiKeys(acc.id)).map((k) => k.id)).toEqual([key.id]);
      // The same GCRA state: the burst spent before the rotation is still spent.
      const after = await store.chargeRateLimit({ key: expected, nowMs: NOW });
      expect(after).toMatchObject({ allowed: false, retryAfterMs: 500 });
    });

    it("accepts the new secret at once and the old one until its grace period ends, by the clock", async () => {
      const { store, key, rotate } = await withKey(makeStore);
      const { hash, rotation } = rotate(1_000);
      await rotation;
      expect(await works(store, hash, NOW)).toBe(true);
      expect(await works(store, key.hash, NOW)).toBe(true);
      expect(await works(store, key.hash, NOW + 999)).toBe(true);
      expect(await works(store, key.hash, NOW + 1_000)).toBe(false);
      expect(await works(store, hash, NOW + 1_000)).toBe(true);
      const found = await store.findApiKeyByHash(hash);
      expect(found && workingPrevious(found, NOW + 999)).toEqual({
        hash: key.hash,
        prefix: key.prefix,
        expireTimeMs: NOW + 1_000,
      });
      expect(found && workingPrevious(found, NOW + 1_000)).toBeUndefined();
    });

    it("with a grace period of 0 ends the old secret at once", async () => {
      const { store, key, rotate } = await withKey(makeStore);
      const { hash, rotation } = rotate(0);
      expect((await rotation)?.outcome).toBe("rotated");
      expect(await works(store, key.hash, NOW)).toBe(false);
      expect(await works(store, hash, NOW)).toBe(true);
    });

    it("rotated again in a grace, keeps only the secret just replaced; the older one ends at once", async () => {
      const { store, key, rotate } = await withKey(makeStore);
      const first = rotate(60_000);
      await first.rotation;
      const second = rotate(5_000, { nowMs: NOW + 1_000 });
      expect((await second.rotation)?.key.previous).toEqual({
        hash: first.hash,
        prefix: `svc_sk_${first.hash.slice(0, 6)}`,
        expireTimeMs: NOW + 6_000,
      });
      expect(await store.findApiKeyByHash(key.hash)).toBeUndefined();
      expect(await works(store, key.hash, NOW + 1_000)).toBe(false);
      expect(await works(store, first.hash, NOW + 5_999)).toBe(true);
      expect(await works(store, first.hash, NOW + 6_000)).toBe(false);
      expect(await works(store, second.hash, NOW + 6_000)).toBe(true);
    });

    it("revoking ends both secrets, and a revoked key is not rotated", async () => {
      const { store, key, rotate } = await withKey(makeStore);
      const first = rotate(60_000);
      await first.rotation;
      const revoked = await store.revokeApiKey(key.id);
      expect(revoked?.revoked).toBe(true);
      expect(await works(store, first.hash, NOW)).toBe(false);
      expect(await works(store, key.hash, NOW)).toBe(false);
      const refused = rotate(60_000);
      expect(await refused.rotation).toEqual({ outcome: "revoked", key: revoked });
      expect(await store.findApiKeyByHash(refused.hash)).toBeUndefined();
      expect(await store.findApiKeyByHash(first.hash)).toEqual(revoked);
    });

    it("answers undefined for a key that does not exist, and indexes nothing", async () => {
      const store = await makeStore();
      const hash = newHash();
      const request = { apiKeyId: "key_missing", hash, prefix: "svc_sk_abcdef", gracePeriodMs: 0, nowMs: NOW };
      expect(await store.rotateApiKey(request)).toBeUndefined();
      expect(await store.findApiKeyByHash(hash)).toBeUndefined();
    });
  });

  describe("expiry", () => {
    it("a key works until its expiry, both secrets included, and is found after it", async () => {
      const { store, key, rotate } = await withKey(makeStore, { expireTimeMs: NOW + 10_000 });
      expect(await store.findApiKeyByHash(key.hash)).toEqual(key);
      expect(await works(store, key.hash, NOW + 9_999)).toBe(true);
      const { hash, rotation } = rotate(60_000);
      expect((await rotation)?.key.expireTimeMs).toBe(NOW + 10_000);
      for (const h of [key.hash, hash]) {
        expect(await works(store, h, NOW + 9_999)).toBe(true);
        expect(await works(store, h, NOW + 10_000)).toBe(false);
      }
      expect((await store.findApiKeyByHash(hash))?.expireTimeMs).toBe(NOW + 10_000);
    });

    it("a rotation may set a new expiry; an expired key is rotated only with one", async () => {
      const { store, key, rotate } = await withKey(makeStore, { expireTimeMs: NOW });
      const refused = rotate(60_000);
      expect(await refused.rotation).toEqual({ outcome: "expired", key });
      expect(await store.findApiKeyByHash(refused.hash)).toBeUndefined();
      const renewed = rotate(60_000, { expireTimeMs: NOW + 86_400_000 });
      expect((await renewed.rotation)?.outcome).toBe("rotated");
      expect(await works(store, renewed.hash, NOW + 86_399_999)).toBe(true);
      expect(await works(store, renewed.hash, NOW + 86_400_000)).toBe(false);
      // The old secret's grace applies again under the new expiry.
      expect(await works(store, key.hash, NOW + 59_999)).toBe(true);
    });

    it("a key without an expiry never expires", async () => {
      const { store, key } = await withKey(makeStore);
      expect((await store.findApiKeyByHash(key.hash))?.expireTimeMs).toBeUndefined();
      expect(await works(store, key.hash, NOW + 100 * 365 * 86_400_000)).toBe(true);
    });
  });
});
