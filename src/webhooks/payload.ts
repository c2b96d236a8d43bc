import { SPEND_ALERT_EVENT_TYPE } from "../store/spend-alerts.ts";
import type { SpendAlert } from "../store/store.ts";

/** A spend alert's webhook body, as receivers parse it (snake_case, like the `/v1` API). */
export interface SpendAlertPayload {
  type: typeof SPEND_ALERT_EVENT_TYPE;
  /** When the settle that reached the threshold ran, ISO 8601. */
  timestamp: string;
  data: {
    account_id: string;
    /** Only for a key's own cap. */
    api_key_id?: string;
    scope: SpendAlert["scope"];
    period: string;
    threshold_percent: number;
    cap_usd_micros: number;
    spent_usd_micros: number;
  };
}

/**
 * The body of every delivery of an alert: built from the alert alone, so each redelivery sends the
 * same bytes (only the timestamp header and the signature change from one attempt to the next).
 */
export function spendAlertBody(alert: SpendAlert): string {
  const payload: SpendAlertPayload = {
    type: SPEND_ALERT_EVENT_TYPE,
    timestamp: new Date(alert.timeMs).toISOString(),
    data: {
      account_id: alert.accountId,
      ...(alert.apiKeyId !== undefined && { api_key_id: alert.apiKeyId }),
      scope: alert.scope,
      period: alert.period,
      threshold_percent: alert.thresholdPercent,
      cap_usd_micros: alert.capUsdMicros,
      spent_usd_micros: alert.spentUsdMicros,
    },
  };
  return JSON.stringify(payload);
}
