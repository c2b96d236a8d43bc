import type { SpendAlert, Store } from "../store.ts";
import { NOW } from "./support.ts";

/** The thresholds the spend-alert contract raises: the default of `SLUICE_SPEND_ALERT_THRESHOLDS`. */
export const PERCENTS = [50, 80, 100];

/** An alert as the contract compares it: what it says, not its id or time. */
export const shapeOf = (a: SpendAlert) => ({
  scope: a.scope,
  ...(a.apiKeyId !== undefined && { apiKeyId: a.apiKeyId }),
  period: a.period,
  percent: a.thresholdPercent,
  cap: a.capUsdMicros,
  spent: a.spentUsdMicros,
});

/**
 * Reads a store's spend alerts through its webhook queue, as a dispatcher does: an endpoint for
 * every account, `fanOut`, then `claimDue`, each claimed delivery recorded delivered so that it is
 * not claimed again. `raised()` answers the alerts queued since its last call, in the order
 * raised, so a test sees what each settle raised.
 */
export async function alertReader(store: Store) {
  const endpointId = `whe_${Math.random().toString(36).slice(2)}`;
  await store.webhooks.createEndpoint({
    id: endpointId,
    url: "http://127.0.0.1:9/",
    secret: "whsec_x",
    createTimeMs: NOW,
  });
  const raised = async (nowMs = NOW): Promise<SpendAlert[]> => {
    await store.webhooks.fanOut({ consumer: "contract", nowMs, max: 1000, claimIdleMs: 60_000 });
    const due = await store.webhooks.claimDue({ nowMs, leaseMs: 60_000, max: 1000 });
    for (const d of due)
      await store.webhooks.recordAttempt({ eventId: d.alert.id, endpointId, outcome: "delivered", nowMs });
    const order = (a: SpendAlert, b: SpendAlert) =>
      a.timeMs - b.timeMs || a.scope.localeCompare(b.scope) || a.thresholdPercent - b.thresholdPercent;
    return due.map((d) => d.alert).sort(order);
  };
  return { endpointId, raised };
}
