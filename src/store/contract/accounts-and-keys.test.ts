import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { readApiKey } from "../../testing/store-reads.ts";
import { account, apiKey, contractBackends, withAccount } from "./support.ts";

describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("accounts", () => {
    it("creates, reads, says whether there are any and returns copies", async () => {
      const store = await makeStore();
      expect(await store.hasAccounts()).toBe(false);
      const acc = account({ email: "a@example.com", spendCapUsdMicros: 5_000_000 });
      await store.createAccount(acc);
      await store.createAccount(account());
      expect(await store.hasAccounts()).toBe(true);
      const got = await store.getAccount(acc.id);
      expect(got).toEqual(acc);
      if (got) got.paymentStatus = "failed";
      expect((await store.getAccount(acc.id))?.paymentStatus).toBe("ok");
      expect(await store.getAccount(randomUUID())).toBeUndefined();
    });

    it("keeps an account without a cap capless", async () => {
      const { store, acc } = await withAccount(makeStore, null);
      expect((await store.getAccount(acc.id))?.spendCapUsdMicros).toBeUndefined();
    });

    it("updates only the fields a patch sets", async () => {
      const { store, acc } = await withAccount(makeStore, 1_000);
      const updated = await store.updateAccount({ accountId: acc.id, patch: { paymentStatus: "failed" } });
      expect(updated).toEqual({ ...acc, paymentStatus: "failed" });
      const again = await store.updateAccount({
        accountId: acc.id,
        patch: { spendCapUsdMicros: 7, subscriptionStatus: "canceled", onboardingComplete: false },
      });
      expect(again).toEqual({
        ...acc,
        paymentStatus: "failed",
        spendCapUsdMicros: 7,
        subscriptionStatus: "canceled",
        onboardingComplete: false,
      });
      expect(await store.updateAccount({ accountId: acc.id, patch: { spendCapUsdMicros: undefined } })).toEqual(again);
      expect(await store.getAccount(acc.id)).toEqual(again);
      expect(await store.updateAccount({ accountId: randomUUID(), patch: { paymentStatus: "ok" } })).toBeUndefined();
    });
  });

  describe("accounts by email", () => {
    it("finds every account with an email, ignoring case and surrounding spaces", async () => {
      const store = await makeStore();
      const first = account({ email: "Ops@Example.com" });
      const second = account({ email: "ops@example.COM", createTimeMs: first.createTimeMs + 1 });
      const other = account({ email: "dev@example.com" });
      for (const a of [first, second, other, account()]) await store.createAccount(a);
      const byId = (list: { id: string }[]) => [...list].sort((a, b) => (a.id < b.id ? -1 : 1));
      for (const query of ["ops@example.com", "  OPS@EXAMPLE.COM\t", "Ops@Example.com"])
        expect(byId(await store.findAccountsByEmail(query))).toEqual(byId([first, second]));
      expect(await store.findAccountsByEmail("dev@example.com")).toEqual([other]);
    });

    it("finds nothing for an unknown email, a part of one, or an empty one", async () => {
      const store = await makeStore();
      await store.createAccount(account({ email: "ops@example.com" }));
      for (const query of ["nobody@example.com", "ops@example", "ops", "", "  "])
        expect(await store.findAccountsByEmail(query)).toEqual([]);
    });

    it("returns copies", async () => {
      const store = await makeStore();
      const acc = account({ email: "ops@example.com" });
      await store.createAccount(acc);
      const [found] = await store.findAccountsByEmail(acc.email ?? "");
      if (found) found.paymentStatus = "failed";
      expect(await store.findAccountsByEmail("ops@example.com")).toEqual([acc]);
    });
  });

  describe("api keys", () => {
    it("creates, finds by hash, lists per account (a test reads by id from the list) and revokes", async () => {
      const { store, acc } = await withAccount(makeStore);
      const other = account();
      await store.createAccount(other);
      const k1 = apiKey(acc.id);
      const k2 = apiKey(acc.id, { rateLimitRps: 2.5, burst: 3 });
      const k3 = apiKey(other.id);
      for (const k of [k1, k2, k3]) await store.createApiKey(k);

      expect(await readApiKey(store, acc.id, k2.id)).toEqual(k2);
      expect(await store.findApiKeyByHash(k1.hash)).toEqual(k1);
      expect(await store.findApiKeyByHash("nope")).toBeUndefined();
      expect(await readApiKey(store, acc.id, "key_missing")).toBeUndefined();
      const listed = await store.listApiKeys(acc.id);
      expect(listed.map((k) => k.id).sort()).toEqual([k1.id, k2.id].sort());
      expect(await store.listApiKeys(randomUUID())).toEqual([]);

      expect(await store.revokeApiKey(k1.id)).toEqual({ ...k1, revoked: true });
      expect((await store.findApiKeyByHash(k1.hash))?.revoked).toBe(true);
      expect((await readApiKey(store, acc.id, k1.id))?.revoked).toBe(true);
      expect((await readApiKey(store, acc.id, k2.id))?.revoked).toBe(false);
      expect(await store.revokeApiKey("key_missing")).toBeUndefined();
    });
  });

  it("answers ping", async () => {
    await expect((await makeStore()).ping()).resolves.toBeUndefined();
  });
});
