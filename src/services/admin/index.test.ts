import { randomUUID } from "node:crypto";
import { toJsonString } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import {
  ListApiKeysResponseSchema,
  PaymentStatus,
  SubscriptionStatus,
} from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { hashApiKey, isWellFormedApiKey } from "../auth/api-key.ts";
import { ADMIN, createCoreFixture, TEST_ADMIN_TOKEN } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { readApiKey } from "../../testing/store-reads.ts";

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const TOKEN = TEST_ADMIN_TOKEN;

function setup(token: string | null = TOKEN) {
  return createCoreFixture({ adminToken: token ?? undefined, now: () => NOW });
}

describe("AdminService", () => {
  describe("authentication", () => {
    it("is off, with admin_disabled, when no admin token is configured", async () => {
      const { admin } = setup(null);
      await expectFailure(
        () => admin.createAccount({ onboardingComplete: true }, ADMIN),
        Code.PermissionDenied,
        "admin_disabled",
      );
      await expectFailure(() => admin.getAccount({ accountId: randomUUID() }), Code.PermissionDenied, "admin_disabled");
      await expectFailure(
        () => admin.createAccount({}, { headers: { authorization: "Bearer undefined" } }),
        Code.PermissionDenied,
        "admin_disabled",
      );
    });

    it.each([
      ["no header", {}],
      ["a wrong token", { authorization: "Bearer wrong" }],
      ["a longer token", { authorization: `Bearer ${TOKEN}x` }],
      ["a prefix of the token", { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
      ["a Basic header", { authorization: `Basic ${TOKEN}` }],
    ])("refuses %s with invalid_admin_token", async (_name, headers: Record<string, string>) => {
      const { admin } = setup();
      await expectFailure(
        () => admin.createAccount({ onboardingComplete: true }, { headers }),
        Code.Unauthenticated,
        "invalid_admin_token",
      );
    });

    it("does not take an API key as the admin token", async () => {
      const { admin } = setup();
      const { account } = await admin.createAccount({ onboardingComplete: true }, ADMIN);
      const { secret } = await admin.createApiKey({ accountId: account?.id ?? "" }, ADMIN);
      await expectFailure(
        () => admin.getAccount({ accountId: account?.id ?? "" }, { headers: { authorization: `Bearer ${secret}` } }),
        Code.Unauthenticated,
        "invalid_admin_token",
      );
    });
  });

  describe("accounts", () => {
    it("creates an account and reads it back with its period balance", async () => {
      const { admin } = setup();
      const { account } = await admin.createAccount(
        { email: "ops@example.com", spendCapUsdMicros: 10_000_000n, onboardingComplete: true },
        ADMIN,
      );
      expect(account?.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(account).toMatchObject({
        email: "ops@example.com",
        spendCapUsdMicros: 10_000_000n,
        onboardingComplete: true,
        paymentStatus: PaymentStatus.OK,
        subscriptionStatus: SubscriptionStatus.ACTIVE,
        period: "2026-11",
        spentUsdMicros: 0n,
        reservedUsdMicros: 0n,
      });
      const { account: got } = await admin.getAccount({ accountId: account?.id ?? "" }, ADMIN);
      expect(got).toEqual(account);
    });

    it("leaves the cap unset when none is given", async () => {
      const { admin } = setup();
      const { account } = await admin.createAccount({}, ADMIN);
      expect(account?.spendCapUsdMicros).toBeUndefined();
      expect(account?.onboardingComplete).toBe(false);
    });

    it("refuses an unknown account and a malformed id", async () => {
      const { admin } = setup();
      await expectFailure(
        () => admin.getAccount({ accountId: randomUUID() }, ADMIN),
        Code.NotFound,
        "account_not_found",
      );
      await expectFailure(
        () => admin.updateAccount({ accountId: randomUUID(), onboardingComplete: true }, ADMIN),
        Code.NotFound,
        "account_not_found",
      );
      await expectFailure(
        () => admin.createApiKey({ accountId: randomUUID() }, ADMIN),
        Code.NotFound,
        "account_not_found",
      );
      for (const accountId of ["not-a-uuid", "", "12345"]) {
        const err = await expectFailure(
          () => admin.getAccount({ accountId }, ADMIN),
          Code.InvalidArgument,
          "invalid_argument",
        );
        expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.field).toBe("account_id");
      }
    });

    it("refuses a negative cap and a malformed email", async () => {
      const { admin } = setup();
      await expectFailure(
        () => admin.createAccount({ spendCapUsdMicros: -1n }, ADMIN),
        Code.InvalidArgument,
        "invalid_argument",
      );
      await expectFailure(
        () => admin.createAccount({ email: "not an email" }, ADMIN),
        Code.InvalidArgument,
        "invalid_argument",
      );
    });

    it("updates only the fields that are set", async () => {
      const { admin } = setup();
      const { account } = await admin.createAccount(
        { email: "a@example.com", spendCapUsdMicros: 5_000n, onboardingComplete: true },
        ADMIN,
      );
      const accountId = account?.id ?? "";
      const failed = (await admin.updateAccount({ accountId, paymentStatus: PaymentStatus.FAILED }, ADMIN)).account;
      expect(failed).toEqual({ ...account, paymentStatus: PaymentStatus.FAILED });
      const capped = (await admin.updateAccount({ accountId, spendCapUsdMicros: 7n }, ADMIN)).account;
      expect(capped).toEqual({ ...account, paymentStatus: PaymentStatus.FAILED, spendCapUsdMicros: 7n });
      const canceled = (
        await admin.updateAccount(
          { accountId, subscriptionStatus: SubscriptionStatus.CANCELED, onboardingComplete: false },
          ADMIN,
        )
      ).account;
      expect(canceled).toEqual({
        ...capped,
        subscriptionStatus: SubscriptionStatus.CANCELED,
        onboardingComplete: false,
      });
      expect((await admin.updateAccount({ accountId }, ADMIN)).account).toEqual(canceled);
      expect((await admin.getAccount({ accountId }, ADMIN)).account).toEqual(canceled);
      await expectFailure(
        () => admin.updateAccount({ accountId, spendCapUsdMicros: -5n }, ADMIN),
        Code.InvalidArgument,
        "invalid_argument",
      );
    });
  });

  describe("api keys", () => {
    it("returns the secret once, stores only its hash, and never lists it", async () => {
      const { admin, store } = setup();
      const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: 1_000n }, ADMIN);
      const accountId = account?.id ?? "";
      const created = await admin.createApiKey({ accountId }, ADMIN);
      expect(isWellFormedApiKey(created.secret)).toBe(true);
      expect(created.apiKey).toMatchObject({ accountId, rateLimitRps: 10, burst: 10, revoked: false });
      expect(created.apiKey?.id).toMatch(/^key_/);
      expect(created.secret.startsWith(created.apiKey?.prefix ?? "?")).toBe(true);
      expect(created.apiKey?.prefix.length).toBeLessThan(created.secret.length - 16);
      expect(Number(created.apiKey?.createTime?.seconds)).toBe(NOW / 1000);

      const second = await admin.createApiKey({ accountId, rateLimitRps: 2.5, burst: 4 }, ADMIN);
      expect(second.secret).not.toBe(created.secret);
      expect(second.apiKey).toMatchObject({ rateLimitRps: 2.5, burst: 4 });

      const listed = await admin.listApiKeys({ accountId }, ADMIN);
      expect(listed.apiKeys.map((k) => k.id).sort()).toEqual([created.apiKey?.id, second.apiKey?.id].sort());
      const json = toJsonString(ListApiKeysResponseSchema, listed);
      for (const secret of [created.secret, second.secret]) {
        expect(json).not.toContain(secret);
        expect(json).not.toContain(secret.slice(13));
        expect(json).not.toContain(hashApiKey(secret));
      }
      const stored = await readApiKey(store, accountId, created.apiKey?.id ?? "");
      expect(stored?.hash).toBe(hashApiKey(created.secret));
      expect(JSON.stringify(stored)).not.toContain(created.secret);
    });

    it("refuses out-of-range limits", async () => {
      const { admin } = setup();
      const { account } = await admin.createAccount({}, ADMIN);
      const accountId = account?.id ?? "";
      for (const limits of [{ rateLimitRps: 0 }, { rateLimitRps: -1 }, { burst: 0 }]) {
        await expectFailure(
          () => admin.createApiKey({ accountId, ...limits }, ADMIN),
          Code.InvalidArgument,
          "invalid_argument",
        );
      }
    });

    it("revokes a key, which then stops working", async () => {
      const { admin, completion } = setup();
      const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: 1_000n }, ADMIN);
      const accountId = account?.id ?? "";
      const { apiKey, secret } = await admin.createApiKey({ accountId }, ADMIN);
      const call = { headers: { authorization: `Bearer ${secret}` } };
      await completion.listModels({}, call);
      const revoked = await admin.revokeApiKey({ apiKeyId: apiKey?.id ?? "" }, ADMIN);
      expect(revoked.apiKey).toMatchObject({ id: apiKey?.id, revoked: true });
      expect((await admin.listApiKeys({ accountId }, ADMIN)).apiKeys[0]?.revoked).toBe(true);
      await expectFailure(() => completion.listModels({}, call), Code.Unauthenticated, "invalid_api_key");
      await expectFailure(
        () => admin.revokeApiKey({ apiKeyId: "key_missing" }, ADMIN),
        Code.NotFound,
        "api_key_not_found",
      );
    });
  });

  it("lists an account's usage records and its charges", async () => {
    const { admin, completion } = setup();
    const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: 1_000n }, ADMIN);
    const accountId = account?.id ?? "";
    const { apiKey, secret } = await admin.createApiKey({ accountId }, ADMIN);
    const done = await completion.createChatCompletion(
      { params: { prompt: "hi" } },
      { headers: { authorization: `Bearer ${secret}` } },
    );
    const { usageRecords, nextPageToken } = await admin.listUsageRecords({ accountId }, ADMIN);
    expect(nextPageToken).toBe("");
    expect(usageRecords).toHaveLength(1);
    expect(usageRecords[0]).toMatchObject({
      id: done.id,
      accountId,
      apiKeyId: apiKey?.id,
      model: "service-extract",
      promptTokens: 7n,
      completionTokens: 1n,
      costUsdMicros: 9n,
    });
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      spentUsdMicros: 9n,
      reservedUsdMicros: 0n,
    });
    await expectFailure(
      () => admin.listUsageRecords({ accountId, pageToken: "garbage" }, ADMIN),
      Code.InvalidArgument,
      "invalid_argument",
    );
    await expectFailure(
      () => admin.listUsageRecords({ accountId: randomUUID() }, ADMIN),
      Code.NotFound,
      "account_not_found",
    );
  });
});
