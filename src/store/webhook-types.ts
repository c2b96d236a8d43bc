/**
 * The spend-alert types of the `Store` contract (store.ts re-exports them): the alert a settle
 * raises when a cap's threshold is first reached, the webhook endpoints that receive alerts, and
 * the durable delivery queue between them (`WebhookStore`). Apart from store.ts so that the
 * interface file stays readable; they depend on nothing else.
 */

/** Whose cap an alert is about: the account's, or one key's own cap. */
export type AlertScope = "account" | "key";

/**
 * One threshold of one cap reached for the first time in a period, as the settle that reached it
 * saw it. Raised at most once per period, scope (the account, or each key) and threshold, however
 * many processes settle at once: the settle step decides it with the charge (see `Store.settle`).
 */
export interface SpendAlert {
  /**
   * Unique per alert and stable for its life: every delivery and redelivery of it carries it as
   * `webhook-id`, so a receiver can drop repeats.
   */
  id: string;
  accountId: string;
  /** The key whose own cap it is about; unset for the account's cap. */
  apiKeyId?: string;
  scope: AlertScope;
  /** The UTC month, such as "2026-11". */
  period: string;
  /** The threshold reached, in percent of the cap. */
  thresholdPercent: number;
  /** The cap at the time of the settle, in micros. */
  capUsdMicros: number;
  /** The scope's spend right after the settle, in micros (at or past the threshold). */
  spentUsdMicros: number;
  /** When the settle ran (its `nowMs`, or the Redis server's clock): the event's timestamp. */
  timeMs: number;
}

/** Where alerts are sent, with the secret their signatures are made with. */
export interface WebhookEndpointRecord {
  id: string;
  /** An http or https URL. */
  url: string;
  /** The account whose alerts it receives; unset for every account's. */
  accountId?: string;
  /** `whsec_` and base64: it must be kept to sign, and is shown to the operator once. */
  secret: string;
  createTimeMs: number;
}

/** Where one alert's delivery to one endpoint stands. */
export type DeliveryStatus = "pending" | "delivered" | "failed";

/** One alert's delivery to one endpoint: created pending when the alert is fanned out. */
export interface WebhookDelivery {
  eventId: string;
  endpointId: string;
  /** The event type, such as "spend.threshold_crossed". */
  eventType: string;
  status: DeliveryStatus;
  /** Attempts made and recorded so far. */
  attempts: number;
  /** The HTTP status of the last attempt; unset when it got none (a timeout, a refused connection). */
  lastHttpStatus?: number;
  /** What went wrong with the last attempt, in words; unset after a success. */
  lastError?: string;
  /** When the next attempt is due (ms); set while pending. */
  nextAttemptMs?: number;
  createTimeMs: number;
  updateTimeMs: number;
}

/** A delivery leased to one dispatcher for one attempt (`WebhookStore.claimDue`). */
export interface DueDelivery {
  alert: SpendAlert;
  endpoint: WebhookEndpointRecord;
  /** Attempts recorded before this one. */
  attempts: number;
}

/** How an attempt ended (`WebhookStore.recordAttempt`). */
export interface DeliveryAttempt {
  eventId: string;
  endpointId: string;
  /** `retry` keeps the delivery pending, due again `retryInMs` from now. */
  outcome: "delivered" | "retry" | "failed";
  /** The caller's clock (see "Time" on `Store`): the Redis store reads its server's. */
  nowMs: number;
  /** For `retry`: how long from now the next attempt is due. */
  retryInMs?: number;
  httpStatus?: number;
  error?: string;
}

/** Takes new alerts off the queue (`WebhookStore.fanOut`). */
export interface FanOutRequest {
  /** This process's name among the dispatchers sharing the queue (a consumer of the Redis stream's group). */
  consumer: string;
  nowMs: number;
  /** At most this many alerts. */
  max: number;
  /** Alerts another dispatcher took this long ago and never fanned out (it died) are taken over. */
  claimIdleMs: number;
}

/** Leases due deliveries (`WebhookStore.claimDue`). */
export interface ClaimRequest {
  nowMs: number;
  /** A leased delivery is due again after this, should its attempt never be recorded (a crash). */
  leaseMs: number;
  max: number;
}

/** One page of an endpoint's deliveries (`WebhookStore.listDeliveries`). */
export interface DeliveriesRequest {
  endpointId: string;
  /** At most this many, newest first. */
  pageSize: number;
}

/**
 * The endpoints and the durable delivery queue of spend alerts. A settle that raises alerts puts
 * them in the queue before it returns (on Redis through its account's outbox, see
 * `createRedisWebhooks`); dispatchers in any number of processes take them off with `fanOut`,
 * which makes one pending delivery per matching endpoint, then lease due deliveries with
 * `claimDue` and record each attempt. Every step survives a crash of the process doing it (on
 * Redis): an alert not fanned out is taken over, a leased delivery is due again when its lease
 * ends, so delivery is at least once. The memory store keeps all of it in process: not durable.
 */
export interface WebhookStore {
  /** Stores a new endpoint. */
  createEndpoint(endpoint: WebhookEndpointRecord): Promise<void>;
  /** Every endpoint, oldest first, secrets included (for the dispatcher; Admin never shows them). */
  listEndpoints(): Promise<WebhookEndpointRecord[]>;
  /** Deletes an endpoint and its delivery list; false when there was none. Its pending deliveries are dropped. */
  deleteEndpoint(endpointId: string): Promise<boolean>;
  /** An endpoint's most recent deliveries (the last 1,000 are kept), newest first. */
  listDeliveries(request: DeliveriesRequest): Promise<WebhookDelivery[]>;
  /**
   * Calls `listener` each time this store queued alerts (after a settle), so that a dispatcher in
   * this process starts at once instead of at its next poll. Returns the unsubscribe.
   */
  onAlerts(listener: () => void): () => void;
  /**
   * Takes up to `max` alerts off the queue, new ones and those another dispatcher left (see
   * `FanOutRequest.claimIdleMs`), and makes one pending delivery, due now, per endpoint that
   * exists then and matches the alert's account. Returns how many alerts it took.
   */
  fanOut(request: FanOutRequest): Promise<number>;
  /** Leases up to `max` deliveries due by `nowMs` to the caller, for one attempt each. */
  claimDue(request: ClaimRequest): Promise<DueDelivery[]>;
  /** Records an attempt: counts it, and keeps the delivery pending (`retry`) or ends it. */
  recordAttempt(attempt: DeliveryAttempt): Promise<void>;
  /** When the soonest pending delivery is due (a leased one: when its lease ends), or undefined. */
  nextDueMs(): Promise<number | undefined>;
  /**
   * Queues alerts that a settle wrote but whose process died before queueing them (their account's
   * outbox, on Redis; nothing on memory). With `everyMs`, runs only when no process of the
   * deployment ran it within that time. Returns how many alerts it queued.
   */
  sweep(options?: { everyMs?: number }): Promise<number>;
  /** Tells the queue a dispatcher is gone for good (a shutdown), once it holds no alert it took. */
  leave(consumer: string): Promise<void>;
}
