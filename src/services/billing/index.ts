import type { ServiceImpl } from "@connectrpc/connect";
import type { BillingService } from "../../../gen/sluice/billing/v1/billing_service_pb.ts";
import { standingReasonOf } from "../account-standing.ts";
import { requirePrincipal } from "../auth/index.ts";
import { periodOf } from "../completion/pricing.ts";
import { forecastCap } from "../forecast.ts";
import { spendByDay } from "../spend-by-day.ts";
import { listUsagePage, usageRecordToProto } from "../usage-records.ts";
import { type EstimateDeps, estimateChatCompletion } from "./estimate.ts";

/**
 * The caller's own view of its billing period and usage records, and the price of a call before it is
 * made. It reads the models and the tokenizer only to estimate calls, by the chat call's own planning.
 */
export function createBillingService(deps: EstimateDeps): ServiceImpl<typeof BillingService> {
  return {
    async getBalance(_req, ctx) {
      const { accountId } = requirePrincipal(ctx.values);
      const now = deps.now();
      const period = periodOf(now);
      const [account, balance] = await Promise.all([
        deps.store.getAccount(accountId),
        deps.store.balance({ accountId, period, nowMs: now }),
      ]);
      const cap = account?.spendCapUsdMicros;
      const forecast = forecastCap({ spentUsdMicros: balance.spentUsdMicros, capUsdMicros: cap, nowMs: now });
      return {
        period,
        ...(cap !== undefined && { spendCapUsdMicros: BigInt(cap) }),
        spentUsdMicros: BigInt(balance.spentUsdMicros),
        reservedUsdMicros: BigInt(balance.reservedUsdMicros),
        // The rule chat calls obey; a missing account is refused as a bad key, not for standing.
        standingReason: (account && standingReasonOf(account)) ?? "",
        burnRateUsdMicrosPerDay: BigInt(forecast.burnRateUsdMicrosPerDay),
        ...(forecast.capReachedDate !== undefined && { capReachedDate: forecast.capReachedDate }),
      };
    },
    async listUsageRecords(req, ctx) {
      const { accountId } = requirePrincipal(ctx.values);
      const page = await listUsagePage(deps.store, accountId, req.pageSize, req.pageToken);
      return { usageRecords: page.records.map(usageRecordToProto), nextPageToken: page.nextPageToken };
    },
    async getSpendByDay(_req, ctx) {
      const { accountId } = requirePrincipal(ctx.values);
      const account = (await deps.store.getAccount(accountId)) ?? { id: accountId };
      return spendByDay(deps.store, account, deps.now());
    },
    estimateChatCompletion(req, ctx) {
      return estimateChatCompletion(deps, requirePrincipal(ctx.values), req.params);
    },
  };
}
