import type { DueDelivery, SpendAlert, WebhookDelivery, WebhookEndpointRecord, WebhookStore } from "../store.ts";
import { DELIVERIES_KEPT, SPEND_ALERT_EVENT_TYPE } from "../spend-alerts.ts";

/** The memory store's webhooks, and how its settle queues the alerts it raised. */
export interface MemoryWebhooks extends WebhookStore {
  /** Queues alerts a settle raised, in the settle's step, and wakes the listeners. */
  enqueue(alerts: readonly SpendAlert[]): void;
}

/** A delivery with its alert, and when it may be claimed (its next attempt, or its lease's end). */
interface Entry {
  delivery: WebhookDelivery;
  alert: SpendAlert;
  dueMs: number;
}

const entryKey = (endpointId: string, eventId: string) => `${endpointId} ${eventId}`;

/**
 * Spend alerts' endpoints and delivery queue in process, for the memory store: the same steps as
 * on Redis, each atomic since it runs to completion, but nothing survives a restart, and one
 * process is the only dispatcher (consumers and idle claims mean nothing here).
 */
export function createMemoryWebhooks(): MemoryWebhooks {
  const endpoints = new Map<string, WebhookEndpointRecord>();
  const queue: SpendAlert[] = [];
  const entries = new Map<string, Entry>();
  /** Each endpoint's deliveries by event id, oldest first, at most `DELIVERIES_KEPT`. */
  const lists = new Map<string, string[]>();
  const listeners = new Set<() => void>();

  const pending = () => [...entries.values()].filter((e) => e.delivery.status === "pending");
  const list = (endpointId: string) => {
    const ids = lists.get(endpointId) ?? [];
    lists.set(endpointId, ids);
    return ids;
  };
  /** Drops the oldest deliveries of a list past the bound; a pending one stays queued, unlisted. */
  const trim = (endpointId: string) => {
    const ids = list(endpointId);
    for (const id of ids.splice(0, Math.max(0, ids.length - DELIVERIES_KEPT))) {
      const key = entryKey(endpointId, id);
      if (entries.get(key)?.delivery.status !== "pending") entries.delete(key);
    }
  };

  return {
    enqueue(alerts) {
      if (alerts.length === 0) return;
      queue.push(...alerts.map((a) => ({ ...a })));
      queueMicrotask(() => {
        for (const listener of listeners) listener();
      });
    },
    async createEndpoint(endpoint) {
      endpoints.set(endpoint.id, { ...endpoint });
    },
    async listEndpoints() {
      return [...endpoints.values()].map((e) => ({ ...e }));
    },
    async deleteEndpoint(endpointId) {
      if (!endpoints.delete(endpointId)) return false;
      for (const [key, e] of entries) if (e.delivery.endpointId === endpointId) entries.delete(key);
      lists.delete(endpointId);
      return true;
    },
    async listDeliveries({ endpointId, pageSize }) {
      const ids = lists.get(endpointId) ?? [];
      return ids
        .slice(-pageSize)
        .reverse()
        .flatMap((id) => {
          const e = entries.get(entryKey(endpointId, id));
          return e ? [{ ...e.delivery }] : [];
        });
    },
    onAlerts(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    async fanOut({ nowMs, max }) {
      const taken = queue.splice(0, max);
      for (const alert of taken) {
        for (const endpoint of endpoints.values()) {
          if (endpoint.accountId !== undefined && endpoint.accountId !== alert.accountId) continue;
          const key = entryKey(endpoint.id, alert.id);
          if (entries.has(key)) continue;
          const delivery: WebhookDelivery = {
            eventId: alert.id,
            endpointId: endpoint.id,
            eventType: SPEND_ALERT_EVENT_TYPE,
            status: "pending",
            attempts: 0,
            nextAttemptMs: nowMs,
            createTimeMs: nowMs,
            updateTimeMs: nowMs,
          };
          entries.set(key, { delivery, alert, dueMs: nowMs });
          list(endpoint.id).push(alert.id);
          trim(endpoint.id);
        }
      }
      return taken.length;
    },
    async claimDue({ nowMs, leaseMs, max }) {
      const due = pending()
        .filter((e) => e.dueMs <= nowMs)
        .sort((a, b) => a.dueMs - b.dueMs)
        .slice(0, max);
      const out: DueDelivery[] = [];
      for (const e of due) {
        e.dueMs = nowMs + leaseMs;
        const endpoint = endpoints.get(e.delivery.endpointId);
        if (endpoint) out.push({ alert: { ...e.alert }, endpoint: { ...endpoint }, attempts: e.delivery.attempts });
      }
      return out;
    },
    async recordAttempt({ eventId, endpointId, outcome, nowMs, retryInMs, httpStatus, error }) {
      const e = entries.get(entryKey(endpointId, eventId));
      // A late attempt never undoes a delivery another attempt already made.
      if (!e || e.delivery.status === "delivered") return;
      const d = e.delivery;
      d.attempts += 1;
      d.status = outcome === "retry" ? "pending" : outcome;
      d.updateTimeMs = nowMs;
      for (const field of ["lastHttpStatus", "lastError", "nextAttemptMs"] as const) delete d[field];
      if (httpStatus !== undefined) d.lastHttpStatus = httpStatus;
      if (error !== undefined) d.lastError = error;
      if (outcome === "retry") {
        e.dueMs = nowMs + (retryInMs ?? 0);
        d.nextAttemptMs = e.dueMs;
      }
      if (d.status !== "pending" && !lists.get(endpointId)?.includes(eventId))
        entries.delete(entryKey(endpointId, eventId));
    },
    async nextDueMs() {
      const times = pending().map((e) => e.dueMs);
      return times.length === 0 ? undefined : Math.min(...times);
    },
    async sweep() {
      return 0;
    },
    async leave() {},
  };
}
