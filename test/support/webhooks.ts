import type { ReceivedWebhook } from "../../src/testing/webhook-receiver.ts";
import type { SpendAlertPayload } from "../../src/webhooks/payload.ts";

/** The `data` of a spend alert's body, as a receiver parses it. */
type AlertData = SpendAlertPayload["data"];

/** A threshold of a scope: "account 50", or "key <key id> 80". */
export const labelOf = (scope: "account" | "key", percent: number, keyId?: string) =>
  scope === "account" ? `account ${percent}` : `key ${keyId} ${percent}`;

/** Each received alert's threshold label and webhook-id. */
export function alertsIn(received: readonly ReceivedWebhook[]): Array<{ label: string; id: string; data: AlertData }> {
  return received.map((r) => {
    const { data } = r.json as { data: AlertData };
    return {
      label: labelOf(data.scope === "key" ? "key" : "account", data.threshold_percent, data.api_key_id),
      id: r.id,
      data,
    };
  });
}

/** The thresholds a scope's final spend has reached on its cap (spent x 100 >= percent x cap). */
export function reached(percents: readonly number[], cap: bigint, spent: bigint, keyId?: string): string[] {
  return percents
    .filter((p) => spent * 100n >= BigInt(p) * cap)
    .map((p) => labelOf(keyId === undefined ? "account" : "key", p, keyId));
}

/** The distinct webhook-ids each threshold label arrived under: exactly-once means one per label. */
export function idsByLabel(received: readonly ReceivedWebhook[]): Record<string, number> {
  const ids = new Map<string, Set<string>>();
  for (const a of alertsIn(received)) ids.set(a.label, (ids.get(a.label) ?? new Set()).add(a.id));
  return Object.fromEntries([...ids].map(([label, set]) => [label, set.size]).sort());
}
