import type { SpendAlert } from "./store.ts";

/**
 * The threshold rule of spend alerts, which both stores apply in their settle step (the Redis
 * settle script line for line): a threshold is reached when spent x 100 >= percent x cap, in
 * integers, so 100 % is reached exactly at the cap. A cap of 0, or none, reaches nothing.
 */
export function reachedPercents(percents: readonly number[], cap: number | undefined, spent: number): number[] {
  if (cap === undefined || cap <= 0) return [];
  return percents.filter((percent) => spent * 100 >= percent * cap);
}

/**
 * The member of a period's set of fired thresholds for one threshold of one scope ("a 80" for
 * the account's cap, "k <key id> 80" for a key's): a threshold whose member is in the set is
 * never raised again that period.
 */
export function firedMember(percent: number, apiKeyId?: string): string {
  return apiKeyId === undefined ? `a ${percent}` : `k ${apiKeyId} ${percent}`;
}

/** What a settle knows of one scope after its charge: the cap and the spend to read thresholds against. */
export interface ScopeSpend {
  apiKeyId?: string;
  cap: number | undefined;
  spent: number;
}

/**
 * The alerts a settle raises for one scope: each threshold reached whose member `fire` adds to
 * the period's set for the first time. `newId` names each alert.
 */
export function raiseAlerts(
  base: Pick<SpendAlert, "accountId" | "period" | "timeMs">,
  percents: readonly number[],
  scope: ScopeSpend,
  fire: (member: string) => boolean,
  newId: () => string,
): SpendAlert[] {
  return reachedPercents(percents, scope.cap, scope.spent)
    .filter((percent) => fire(firedMember(percent, scope.apiKeyId)))
    .map((percent) => ({
      ...base,
      id: newId(),
      ...(scope.apiKeyId !== undefined && { apiKeyId: scope.apiKeyId }),
      scope: scope.apiKeyId === undefined ? "account" : "key",
      thresholdPercent: percent,
      capUsdMicros: scope.cap ?? 0,
      spentUsdMicros: scope.spent,
    }));
}

/**
 * How many deliveries each endpoint's list keeps (`WebhookStore.listDeliveries`), the newest:
 * enough to look back over weeks of alerts, bounded whatever the traffic.
 */
export const DELIVERIES_KEPT = 1000;

/** The webhook event type of a spend alert, as deliveries record it and payloads carry it. */
export const SPEND_ALERT_EVENT_TYPE = "spend.threshold_crossed";
