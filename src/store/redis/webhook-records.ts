import { createHash } from "node:crypto";
import { firedMember } from "../spend-alerts.ts";
import type { DeliveryStatus, SpendAlert, WebhookDelivery, WebhookEndpointRecord } from "../store.ts";
import { recordOf } from "./records.ts";

/**
 * Spend alerts, deliveries and endpoints <-> their Redis hashes, streams and JSON. An alert's
 * fields are the ones the settle script writes to an outbox (account, key, period, percent, cap,
 * spent, time), plus its id once it is queued.
 */

/** An alert from its fields, or undefined when they are not one (an expired or foreign hash). */
export function parseAlert(h: Record<string, string>): SpendAlert | undefined {
  if (!h.id || !h.account || !h.period) return undefined;
  return {
    id: h.id,
    accountId: h.account,
    ...(h.key && { apiKeyId: h.key }),
    scope: h.key ? "key" : "account",
    period: h.period,
    thresholdPercent: Number(h.percent),
    capUsdMicros: Number(h.cap),
    spentUsdMicros: Number(h.spent),
    timeMs: Number(h.time),
  };
}

/** An alert's hash fields, as a flat list. */
export function alertFields(a: SpendAlert): string[] {
  return [
    ...["id", a.id, "account", a.accountId, "key", a.apiKeyId ?? "", "period", a.period],
    ...["percent", String(a.thresholdPercent), "cap", String(a.capUsdMicros), "spent", String(a.spentUsdMicros)],
    ...["time", String(a.timeMs)],
  ];
}

/**
 * The alert an outbox entry holds. Its id is a hash of the account, the period, the threshold's
 * fired member and the entry's id: the same whoever moves the entry, however often (so queueing it
 * is idempotent), and unique per raise, so a threshold raised twice, were the rule ever broken,
 * would show as two ids and not hide as one.
 */
export function outboxAlert(
  accountId: string,
  entryId: string,
  fields: readonly string[] | null,
): SpendAlert | undefined {
  const h = recordOf(fields);
  const member = firedMember(Number(h.percent), h.key || undefined);
  const digest = createHash("sha256").update(`${accountId} ${h.period} ${member} ${entryId}`).digest("hex");
  return parseAlert({ ...h, account: accountId, id: `evt_${digest.slice(0, 32)}` });
}

/** The `id` field of a queue entry ('' when it has none). */
export const queuedAlertId = (fields: readonly string[] | null): string => recordOf(fields).id ?? "";

const STATUSES: readonly DeliveryStatus[] = ["pending", "delivered", "failed"];

/** A delivery from its hash, or undefined when it has expired. */
export function parseDelivery(
  endpointId: string,
  eventId: string,
  h: Record<string, string>,
): WebhookDelivery | undefined {
  const status = STATUSES.find((s) => s === h.status);
  if (!status) return undefined;
  return {
    eventId,
    endpointId,
    eventType: h.type ?? "",
    status,
    attempts: Number(h.attempts ?? 0),
    ...(h.last_status && { lastHttpStatus: Number(h.last_status) }),
    ...(h.last_error && { lastError: h.last_error }),
    ...(status === "pending" && h.next && { nextAttemptMs: Number(h.next) }),
    createTimeMs: Number(h.created ?? 0),
    updateTimeMs: Number(h.updated ?? 0),
  };
}

/** An endpoint as its JSON in the endpoints hash. */
export const endpointJson = (e: WebhookEndpointRecord): string => JSON.stringify(e);

/** An endpoint from its JSON, or undefined when it is not one. */
export function parseEndpoint(json: string): WebhookEndpointRecord | undefined {
  try {
    const e = JSON.parse(json) as Partial<WebhookEndpointRecord>;
    if (typeof e.id !== "string" || typeof e.url !== "string" || typeof e.secret !== "string") return undefined;
    return {
      id: e.id,
      url: e.url,
      ...(typeof e.accountId === "string" && { accountId: e.accountId }),
      secret: e.secret,
      createTimeMs: Number(e.createTimeMs ?? 0),
    };
  } catch {
    return undefined;
  }
}
