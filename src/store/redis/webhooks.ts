import { DELIVERIES_KEPT, SPEND_ALERT_EVENT_TYPE } from "../spend-alerts.ts";
import type { DueDelivery, WebhookDelivery, WebhookEndpointRecord, WebhookStore } from "../store.ts";
import { guarded as guardedWithin, type RedisClient } from "./client.ts";
import type { createKeys } from "./keys.ts";
import { num } from "./records.ts";
import { scanKeys } from "./scan.ts";
import { createScript } from "./scripts.ts";
import { CLAIM_DUE, DROP_EMPTY_OUTBOX, FAN_OUT, QUEUE_ALERT, RECORD_ATTEMPT } from "./webhook-scripts.ts";
import {
  alertFields,
  endpointJson,
  outboxAlert,
  parseAlert,
  parseDelivery,
  parseEndpoint,
  queuedAlertId,
} from "./webhook-records.ts";

const scripts = {
  queue: createScript(QUEUE_ALERT),
  dropEmptyOutbox: createScript(DROP_EMPTY_OUTBOX),
  fanOut: createScript(FAN_OUT),
  claimDue: createScript(CLAIM_DUE),
  recordAttempt: createScript(RECORD_ATTEMPT),
};

/** The queue's consumer group: one per deployment (per key prefix), each process a consumer in it. */
const GROUP = "dispatchers";

/**
 * How long an alert's hash and its deliveries are kept after their last change: far past the
 * retries of a delivery (about an hour), so Admin shows recent history, and bounded.
 */
const KEEP_SECONDS = 30 * 24 * 3600;

/**
 * The deadline of a queue step (a dispatcher's, never a caller's): it may take several round
 * trips, and a dispatcher that meets a slow Redis only tries again later.
 */
const QUEUE_STEP_MS = 10_000;

/** Entries read from a stream: id and flat fields (null for an entry deleted while pending). */
type StreamEntry = [string, string[] | null];

/** What the webhooks share with the rest of the Redis store. */
export interface RedisWebhooksDeps {
  redis: RedisClient;
  keys: ReturnType<typeof createKeys>;
  /** Runs store commands within the store's deadline (503 past it): an operator's, and a settle's move. */
  guarded<T>(operation: () => Promise<T>): Promise<T>;
  /** The "now" a script gets: empty makes it read the server's clock. */
  now(nowMs: number): string | number;
  /**
   * Whether a settle's alerts are moved to the queue as soon as it returns (the default); off, they
   * stay in their outbox as a process that crashed right after its settle leaves them, for a sweep.
   */
  moveOutboxes: boolean;
}

/** The Redis webhooks, and the step the settle runs when its script raised alerts. */
export interface RedisWebhooks {
  webhooks: WebhookStore;
  /** Moves an account's outbox to the queue and wakes this process's dispatcher; never fails. */
  alertsRaised(accountId: string): Promise<void>;
}

/**
 * Spend alerts' endpoints and durable delivery queue on Redis. The settle script cannot reach a
 * global key on Cluster (another slot), so it appends alerts to its account's outbox (a stream in
 * the account's slot) atomically with the charge, and the settling process moves them to the
 * global queue (a stream under the `{wh}` hash tag) right after: idempotently, since each alert's
 * hash marks it queued. A process that dies between the two leaves an outbox that `sweep` (SCAN
 * MATCH, never KEYS) moves later. Dispatchers read the queue as consumers of one group, fan each
 * alert out to a delivery per endpoint, and take over alerts whose consumer died (XAUTOCLAIM);
 * deliveries wait in a due set (ZSET) with leases, so each attempt is made by one process at a time.
 */
export function createRedisWebhooks(deps: RedisWebhooksDeps): RedisWebhooks {
  const { redis, keys, guarded, now } = deps;
  const wh = keys.webhooks;
  const listeners = new Set<() => void>();
  const queueStep = <T>(operation: () => Promise<T>) => guardedWithin(operation, QUEUE_STEP_MS);
  let groupMade = false;

  const notify = () => {
    for (const listener of listeners) listener();
  };

  /** Moves every alert of an account's outbox to the queue (each once); returns how many were new. */
  const moveOutbox = async (accountId: string): Promise<number> => {
    const outbox = keys.alertOutbox(accountId);
    let moved = 0;
    for (;;) {
      const entries = (await redis.xrange(outbox, "-", "+", "COUNT", 100)) as StreamEntry[];
      if (entries.length === 0) break;
      for (const [entryId, fields] of entries) {
        const alert = outboxAlert(accountId, entryId, fields);
        if (!alert) continue;
        const queued = await scripts.queue.run(
          redis,
          [wh.event(alert.id), wh.queue],
          [KEEP_SECONDS, alert.id, ...alertFields(alert)],
        );
        moved += num(queued);
      }
      await redis.xdel(outbox, ...entries.map(([id]) => id));
    }
    await scripts.dropEmptyOutbox.run(redis, [outbox], []);
    return moved;
  };

  const listEndpoints = async (): Promise<WebhookEndpointRecord[]> =>
    Object.values(await redis.hgetall(wh.endpoints))
      .map(parseEndpoint)
      .filter((e): e is WebhookEndpointRecord => e !== undefined)
      .sort((a, b) => a.createTimeMs - b.createTimeMs);

  const ensureGroup = async () => {
    if (groupMade) return;
    try {
      // From the start of the stream: alerts queued before any dispatcher ran are read too.
      await redis.xgroup("CREATE", wh.queue, GROUP, "0", "MKSTREAM");
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith("BUSYGROUP"))) throw err;
    }
    groupMade = true;
  };

  /** Reads new queue entries and takes over idle ones; a lost group (a flushed Redis) is made again next time. */
  const takeEntries = async (consumer: string, max: number, claimIdleMs: number): Promise<StreamEntry[]> => {
    await ensureGroup();
    try {
      const claimed = (await redis.xautoclaim(wh.queue, GROUP, consumer, claimIdleMs, "0-0", "COUNT", max)) as [
        string,
        StreamEntry[],
      ];
      const read = (await redis.xreadgroup("GROUP", GROUP, consumer, "COUNT", max, "STREAMS", wh.queue, ">")) as Array<
        [string, StreamEntry[]]
      > | null;
      return [...claimed[1], ...(read?.[0]?.[1] ?? [])];
    } catch (err) {
      if (err instanceof Error && err.message.startsWith("NOGROUP")) groupMade = false;
      throw err;
    }
  };

  const webhooks: WebhookStore = {
    createEndpoint: (endpoint) =>
      guarded(async () => {
        await redis.hset(wh.endpoints, endpoint.id, endpointJson(endpoint));
      }),
    listEndpoints: () => guarded(listEndpoints),
    deleteEndpoint: (endpointId) =>
      guarded(async () => {
        const deleted = await redis.hdel(wh.endpoints, endpointId);
        await redis.del(wh.deliveries(endpointId));
        return deleted > 0;
      }),
    listDeliveries: ({ endpointId, pageSize }) =>
      guarded(async () => {
        const ids = await redis.zrevrange(wh.deliveries(endpointId), 0, pageSize - 1);
        const hashes = await Promise.all(ids.map((id) => redis.hgetall(wh.delivery(endpointId, id))));
        return hashes
          .map((h, i) => parseDelivery(endpointId, ids[i] ?? "", h))
          .filter((d): d is WebhookDelivery => d !== undefined);
      }),
    onAlerts(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    fanOut: ({ consumer, nowMs, max, claimIdleMs }) =>
      queueStep(async () => {
        const entries = await takeEntries(consumer, max, claimIdleMs);
        if (entries.length === 0) return 0;
        const endpoints = await listEndpoints();
        for (const [entryId, fields] of entries) {
          const eventId = queuedAlertId(fields);
          const accountId = eventId === "" ? null : await redis.hget(wh.event(eventId), "account");
          const targets = endpoints.filter((e) => e.accountId === undefined || e.accountId === accountId);
          await scripts.fanOut.run(
            redis,
            [
              wh.queue,
              wh.due,
              wh.event(eventId),
              ...targets.flatMap((e) => [wh.delivery(e.id, eventId), wh.deliveries(e.id)]),
            ],
            [
              entryId,
              GROUP,
              now(nowMs),
              KEEP_SECONDS,
              DELIVERIES_KEPT,
              eventId,
              SPEND_ALERT_EVENT_TYPE,
              ...targets.map((e) => e.id),
            ],
          );
        }
        return entries.length;
      }),
    claimDue: ({ nowMs, leaseMs, max }) =>
      queueStep(async () => {
        const members = (await scripts.claimDue.run(redis, [wh.due], [now(nowMs), leaseMs, max])) as string[];
        if (members.length === 0) return [];
        const endpoints = new Map((await listEndpoints()).map((e) => [e.id, e]));
        const out: DueDelivery[] = [];
        for (const member of members) {
          const [eventId = "", endpointId = ""] = member.split(" ");
          const [alertHash, attempts] = await Promise.all([
            redis.hgetall(wh.event(eventId)),
            redis.hget(wh.delivery(endpointId, eventId), "attempts"),
          ]);
          const alert = parseAlert(alertHash);
          const endpoint = endpoints.get(endpointId);
          // A delivery whose endpoint was deleted, or whose alert or record expired, is dropped.
          if (alert && endpoint && attempts !== null) out.push({ alert, endpoint, attempts: num(attempts) });
          else await redis.zrem(wh.due, member);
        }
        return out;
      }),
    recordAttempt: ({ eventId, endpointId, outcome, nowMs, retryInMs, httpStatus, error }) =>
      queueStep(async () => {
        await scripts.recordAttempt.run(
          redis,
          [wh.delivery(endpointId, eventId), wh.due],
          [
            `${eventId} ${endpointId}`,
            outcome,
            now(nowMs),
            retryInMs ?? 0,
            httpStatus ?? "",
            error ?? "",
            KEEP_SECONDS,
          ],
        );
      }),
    nextDueMs: () =>
      queueStep(async () => {
        const [, score] = await redis.zrange(wh.due, "0", "0", "WITHSCORES");
        return score === undefined ? undefined : Number(score);
      }),
    // No deadline: a walk of a big keyspace takes as long as it takes, one short SCAN step at a time.
    async sweep({ everyMs } = {}) {
      if (everyMs !== undefined && (await redis.set(wh.sweepLock, "1", "PX", everyMs, "NX")) === null) return 0;
      let moved = 0;
      await scanKeys(redis, keys.alertOutboxPattern, async (found) => {
        for (const key of found) {
          const accountId = keys.accountIdOfOutbox(key);
          if (accountId !== undefined) moved += await moveOutbox(accountId);
        }
      });
      if (moved > 0) notify();
      return moved;
    },
    leave: (consumer) =>
      queueStep(async () => {
        const held = await redis.xpending(wh.queue, GROUP, "-", "+", 1, consumer);
        if (held.length === 0) await redis.xgroup("DELCONSUMER", wh.queue, GROUP, consumer);
      }),
  };

  return {
    webhooks,
    async alertsRaised(accountId) {
      if (!deps.moveOutboxes) return;
      try {
        // Within the store's deadline: a settle's caller never waits long on its alerts.
        await guarded(() => moveOutbox(accountId));
      } catch {
        // The alerts wait in their outbox for a sweep: a settle is never failed by its alerts.
      }
      notify();
    },
  };
}
