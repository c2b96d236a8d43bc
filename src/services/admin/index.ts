import { randomUUID } from "node:crypto";
import type { ServiceImpl } from "@connectrpc/connect";
import { z } from "zod";
import { type AdminService, PaymentStatus, SubscriptionStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { sluiceError } from "../../errors/catalogue.ts";
import type { AccountPatch, AccountRecord, ApiKeyRecord, Balance, Store } from "../../store/store.ts";
import { apiKeyToProto, keyBalancesNow, listApiKeysShown } from "../api-keys.ts";
import { displayPrefix, generateApiKey, hashApiKey } from "../auth/api-key.ts";
import { periodOf } from "../completion/pricing.ts";
import { spendByDay } from "../spend-by-day.ts";
import { listUsagePage, usageRecordToProto } from "../usage-records.ts";
import { capSchema, keyLimitsOf, keyPatchOf } from "./key-limits.ts";
import { expireTimeMsOf, gracePeriodMsOf, invalidField } from "./key-times.ts";
import { createWebhookAdmin } from "./webhooks.ts";

/** Rate-limit defaults of DESIGN: 10 requests per second with a burst of 10. */
export const DEFAULT_RATE_LIMIT_RPS = 10;
export const DEFAULT_BURST = 10;

const uuid = z.string().uuid();

/** Parses one admin field or answers 400 `invalid_argument` naming it. */
function check<T>(schema: z.ZodType<T>, value: unknown, field: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw invalidField(field, parsed.error.issues[0]?.message ?? "invalid");
}

const PAYMENT: Record<PaymentStatus, AccountRecord["paymentStatus"] | undefined> = {
  [PaymentStatus.UNSPECIFIED]: undefined,
  [PaymentStatus.OK]: "ok",
  [PaymentStatus.FAILED]: "failed",
};
const SUBSCRIPTION: Record<SubscriptionStatus, AccountRecord["subscriptionStatus"] | undefined> = {
  [SubscriptionStatus.UNSPECIFIED]: undefined,
  [SubscriptionStatus.ACTIVE]: "active",
  [SubscriptionStatus.CANCELED]: "canceled",
};

/**
 * Admin's `ApiKey`: the shared public fields (a replaced secret as of `nowMs`, the period's spend in
 * `balance`), and the account id.
 */
const keyToProto = (k: ApiKeyRecord, nowMs: number, balance?: Balance) => ({
  ...apiKeyToProto(k, nowMs, balance),
  accountId: k.accountId,
});

const keyId = z.string().min(1).max(128);

/** SearchAccounts answers at most this many accounts (the proto promises it). */
export const MAX_SEARCH_RESULTS = 100;

export interface AdminDeps {
  store: Store;
  now: () => number;
}

/**
 * The operator's API. Keys are issued here and only here: the secret is returned once and
 * only its hash is stored.
 */
export function createAdminService(deps: AdminDeps): ServiceImpl<typeof AdminService> {
  const { store } = deps;

  const accountToProto = async (a: AccountRecord) => {
    const now = deps.now();
    const period = periodOf(now);
    const balance = await store.balance({ accountId: a.id, period, nowMs: now });
    return {
      id: a.id,
      ...(a.email !== undefined && { email: a.email }),
      ...(a.spendCapUsdMicros !== undefined && { spendCapUsdMicros: BigInt(a.spendCapUsdMicros) }),
      onboardingComplete: a.onboardingComplete,
      paymentStatus: a.paymentStatus === "failed" ? PaymentStatus.FAILED : PaymentStatus.OK,
      subscriptionStatus: a.subscriptionStatus === "canceled" ? SubscriptionStatus.CANCELED : SubscriptionStatus.ACTIVE,
      period,
      spentUsdMicros: BigInt(balance.spentUsdMicros),
      reservedUsdMicros: BigInt(balance.reservedUsdMicros),
    };
  };

  /** One key as Admin shows it, with what it spent and holds this period (one more store step). */
  const withBalance = async (k: ApiKeyRecord, nowMs: number) =>
    keyToProto(k, nowMs, (await keyBalancesNow(store, k.accountId, nowMs)).get(k.id));

  const mustGetAccount = async (accountId: string) => {
    const id = check(uuid, accountId, "account_id");
    const account = await store.getAccount(id);
    if (!account) throw sluiceError("account_not_found", { metadata: { account_id: id } });
    return account;
  };

  return {
    async createAccount(req) {
      const account: AccountRecord = {
        id: randomUUID(),
        onboardingComplete: req.onboardingComplete,
        paymentStatus: "ok",
        subscriptionStatus: "active",
        createTimeMs: deps.now(),
      };
      if (req.email !== undefined) account.email = check(z.string().email(), req.email, "email");
      if (req.spendCapUsdMicros !== undefined)
        account.spendCapUsdMicros = Number(check(capSchema, req.spendCapUsdMicros, "spend_cap_usd_micros"));
      await store.createAccount(account);
      return { account: await accountToProto(account) };
    },

    async getAccount(req) {
      return { account: await accountToProto(await mustGetAccount(req.accountId)) };
    },

    async updateAccount(req) {
      const { id } = await mustGetAccount(req.accountId);
      const patch: AccountPatch = {};
      if (req.spendCapUsdMicros !== undefined)
        patch.spendCapUsdMicros = Number(check(capSchema, req.spendCapUsdMicros, "spend_cap_usd_micros"));
      if (req.onboardingComplete !== undefined) patch.onboardingComplete = req.onboardingComplete;
      if (req.paymentStatus !== undefined) patch.paymentStatus = PAYMENT[req.paymentStatus] ?? "ok";
      if (req.subscriptionStatus !== undefined)
        patch.subscriptionStatus = SUBSCRIPTION[req.subscriptionStatus] ?? "active";
      const updated = await store.updateAccount({ accountId: id, patch });
      if (!updated) throw sluiceError("account_not_found", { metadata: { account_id: id } });
      return { account: await accountToProto(updated) };
    },

    async createApiKey(req) {
      const { id: accountId } = await mustGetAccount(req.accountId);
      const nowMs = deps.now();
      const expireTimeMs = expireTimeMsOf(req.expiration, nowMs);
      const secret = generateApiKey();
      const key: ApiKeyRecord = {
        id: `key_${randomUUID().replaceAll("-", "")}`,
        accountId,
        prefix: displayPrefix(secret),
        hash: hashApiKey(secret),
        rateLimitRps: check(
          z.number().positive().max(1_000_000),
          req.rateLimitRps ?? DEFAULT_RATE_LIMIT_RPS,
          "rate_limit_rps",
        ),
        burst: check(z.number().int().min(1).max(1_000_000), req.burst ?? DEFAULT_BURST, "burst"),
        revoked: false,
        createTimeMs: nowMs,
        ...(expireTimeMs !== undefined && { expireTimeMs }),
        ...keyLimitsOf(req),
      };
      await store.createApiKey(key);
      return { apiKey: keyToProto(key, nowMs), secret };
    },

    async revokeApiKey(req) {
      const id = check(keyId, req.apiKeyId, "api_key_id");
      const key = await store.revokeApiKey(id);
      if (!key) throw sluiceError("api_key_not_found", { metadata: { api_key_id: id } });
      return { apiKey: await withBalance(key, deps.now()) };
    },

    async updateApiKey(req) {
      const id = check(keyId, req.apiKeyId, "api_key_id");
      const key = await store.updateApiKey({ apiKeyId: id, patch: keyPatchOf(req) });
      if (!key) throw sluiceError("api_key_not_found", { metadata: { api_key_id: id } });
      return { apiKey: await withBalance(key, deps.now()) };
    },

    async rotateApiKey(req) {
      const id = check(keyId, req.apiKeyId, "api_key_id");
      const nowMs = deps.now();
      const gracePeriodMs = gracePeriodMsOf(req.gracePeriod);
      const expireTimeMs = expireTimeMsOf(req.expiration, nowMs);
      const secret = generateApiKey();
      const rotation = await store.rotateApiKey({
        apiKeyId: id,
        hash: hashApiKey(secret),
        prefix: displayPrefix(secret),
        gracePeriodMs,
        nowMs,
        ...(expireTimeMs !== undefined && { expireTimeMs }),
      });
      if (!rotation) throw sluiceError("api_key_not_found", { metadata: { api_key_id: id } });
      if (rotation.outcome === "revoked") throw invalidField("api_key_id", "the key is revoked; it cannot be rotated");
      if (rotation.outcome === "expired")
        throw invalidField("expire_time", "the key has expired; give it a new expire_time or ttl to rotate it");
      return { apiKey: await withBalance(rotation.key, nowMs), secret };
    },

    async listApiKeys(req) {
      const { id } = await mustGetAccount(req.accountId);
      return { apiKeys: await listApiKeysShown(store, id, deps.now(), keyToProto) };
    },

    async listUsageRecords(req) {
      const { id } = await mustGetAccount(req.accountId);
      const page = await listUsagePage(store, id, req.pageSize, req.pageToken);
      return { usageRecords: page.records.map(usageRecordToProto), nextPageToken: page.nextPageToken };
    },

    async searchAccounts(req) {
      // An empty query finds nothing and is no error: the console checks an admin token with it.
      const query = req.query.trim();
      if (query === "") return { accounts: [] };
      const [byId, byEmail] = await Promise.all([store.getAccount(query), store.findAccountsByEmail(query)]);
      const found = byId ? [byId] : byEmail.sort((a, b) => b.createTimeMs - a.createTimeMs);
      return { accounts: await Promise.all(found.slice(0, MAX_SEARCH_RESULTS).map(accountToProto)) };
    },

    async getSpendByDay(req) {
      return spendByDay(store, await mustGetAccount(req.accountId), deps.now());
    },

    ...createWebhookAdmin({ ...deps, mustGetAccount }),
  };
}
