import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Logger } from "../logger.ts";
import type { DueDelivery, WebhookStore } from "../store/store.ts";
import { attemptDelivery } from "./attempt.ts";

/** When and how often a delivery is tried (`SLUICE_WEBHOOK_*`). */
export interface RetryPolicy {
  /** Attempts in all; the last failed one fails the delivery for good. */
  maxAttempts: number;
  /** The wait after the first failed attempt; each later one doubles it. */
  retryBaseMs: number;
}

/**
 * The wait before the attempt after `attempts` failed ones: exponential (`retryBaseMs` x
 * 2^(attempts - 1)) with ±20 % jitter, so that endpoints coming back are not hit by every
 * dispatcher at the same instant. With the defaults (30 s, 8 attempts) the 7 waits add up to about
 * an hour.
 */
export function retryDelayMs(attempts: number, retryBaseMs: number, random: () => number = Math.random): number {
  return Math.round(retryBaseMs * 2 ** Math.max(0, attempts - 1) * (0.8 + 0.4 * random()));
}

/** What a dispatcher needs: the store's queue, a logger and a clock, and its timings (`SLUICE_WEBHOOK_*`). */
export interface DispatcherDeps extends RetryPolicy {
  webhooks: WebhookStore;
  logger: Logger;
  now: () => number;
  /** How long an attempt waits for the endpoint's answer (`SLUICE_WEBHOOK_TIMEOUT_MS`). */
  timeoutMs: number;
  /** How often the queue is read for alerts other processes raised, and for due retries. */
  pollMs: number;
  /** How often the deployment sweeps outboxes left by crashed processes; default 5 minutes. */
  sweepEveryMs?: number;
  /** Jitter's source; tests fix it. */
  random?: () => number;
  fetch?: typeof fetch;
}

/** A running dispatcher. */
export interface WebhookDispatcher {
  /**
   * Stops: aborts attempts in flight (recorded as failed, to be retried), waits for them, and leaves
   * the queue; a sweep in progress is not waited for (the next one, anywhere, takes it up).
   */
  close(): Promise<void>;
}

/** Deliveries attempted at once by one process. */
const CONCURRENCY = 16;
/** Alerts taken off the queue per step. */
const BATCH = 100;
/** A delivery leased for an attempt is due again after this, should the attempt never be recorded. */
const LEASE_MS = 60_000;
/** Alerts another dispatcher took this long ago and never fanned out are taken over (it died). */
const CLAIM_IDLE_MS = 30_000;
const SWEEP_EVERY_MS = 5 * 60_000;

/**
 * Delivers spend alerts to webhook endpoints, at least once, from every core process: each is a
 * consumer of the store's queue, so alerts raised anywhere are delivered by one of them. It runs
 * at once when this process queued alerts (`onAlerts`), when a retry it knows of is due, and every
 * `pollMs`; at start and every `sweepEveryMs` it sweeps outboxes left by crashed processes. An
 * attempt that fails is retried with `retryDelayMs` until `maxAttempts`, then the delivery fails.
 */
export function createWebhookDispatcher(deps: DispatcherDeps): WebhookDispatcher {
  const { webhooks, logger, now } = deps;
  const consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const stop = new AbortController();
  const fetchFn = deps.fetch ?? fetch;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;

  const attempt = async (due: DueDelivery) => {
    const result = await attemptDelivery(due, {
      nowMs: now(),
      timeoutMs: deps.timeoutMs,
      stop: stop.signal,
      fetch: fetchFn,
    });
    const attempts = due.attempts + 1;
    const outcome = result.delivered ? "delivered" : attempts >= deps.maxAttempts ? "failed" : "retry";
    const ids = { eventId: due.alert.id, endpointId: due.endpoint.id };
    await webhooks.recordAttempt({
      ...ids,
      outcome,
      nowMs: now(),
      ...(outcome === "retry" && { retryInMs: retryDelayMs(attempts, deps.retryBaseMs, deps.random) }),
      ...(result.httpStatus !== undefined && { httpStatus: result.httpStatus }),
      ...(result.error !== undefined && { error: result.error }),
    });
    const fields = { ...ids, attempts, ...(result.httpStatus !== undefined && { httpStatus: result.httpStatus }) };
    if (outcome === "delivered") logger.info("webhook delivered", fields);
    else if (outcome === "failed") logger.warn("webhook delivery failed for good", { ...fields, error: result.error });
    else logger.debug("webhook attempt failed; retrying", { ...fields, error: result.error });
  };

  /** One pass: new alerts fanned out, every due delivery attempted, then the next wake-up set. */
  const pass = async () => {
    let next: number | undefined;
    try {
      while ((await webhooks.fanOut({ consumer, nowMs: now(), max: BATCH, claimIdleMs: CLAIM_IDLE_MS })) === BATCH) {
        if (stop.signal.aborted) return;
      }
      for (;;) {
        if (stop.signal.aborted) return;
        const due = await webhooks.claimDue({ nowMs: now(), leaseMs: LEASE_MS, max: CONCURRENCY });
        if (due.length === 0) break;
        await Promise.all(due.map(attempt));
      }
      next = await webhooks.nextDueMs();
    } catch (err) {
      logger.warn("webhook dispatch failed; trying again at the next poll", {
        error: err instanceof Error ? err.message : String(err),
      });
    }
    schedule(next);
  };

  const schedule = (nextDueMs: number | undefined) => {
    if (stop.signal.aborted) return;
    clearTimeout(timer);
    const wait = nextDueMs === undefined ? deps.pollMs : Math.min(deps.pollMs, Math.max(0, nextDueMs - now()));
    timer = setTimeout(wake, wait);
    timer.unref();
  };

  /** Runs a pass now, or right after the one running. */
  function wake(): void {
    if (stop.signal.aborted) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        await pass();
      } while (again && !stop.signal.aborted);
    })().finally(() => {
      running = undefined;
    });
  }

  const sweep = (everyMs?: number) =>
    webhooks.sweep(everyMs === undefined ? {} : { everyMs }).then(
      (moved) => {
        if (moved > 0) logger.info("spend alerts recovered from outboxes", { alerts: moved });
      },
      (err: unknown) => {
        // A sweep a shutdown cut short is taken up by the next one (moves are idempotent).
        if (!stop.signal.aborted)
          logger.warn("outbox sweep failed", { error: err instanceof Error ? err.message : String(err) });
      },
    );
  const sweepEveryMs = deps.sweepEveryMs ?? SWEEP_EVERY_MS;
  const sweeper = setInterval(() => void sweep(sweepEveryMs), sweepEveryMs);
  sweeper.unref();
  const unsubscribe = webhooks.onAlerts(wake);
  void sweep();
  wake();

  return {
    async close() {
      stop.abort();
      clearTimeout(timer);
      clearInterval(sweeper);
      unsubscribe();
      await running;
      await webhooks.leave(consumer).catch(() => undefined);
    },
  };
}
