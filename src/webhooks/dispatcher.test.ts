import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../logger.ts";
import { createMemoryStore } from "../store/memory/index.ts";
import type { Store } from "../store/store.ts";
import { startWebhookReceiver, type Respond, type WebhookReceiver } from "../testing/webhook-receiver.ts";
import { retryDelayMs, createWebhookDispatcher, type WebhookDispatcher } from "./dispatcher.ts";
import { generateWebhookSecret, signWebhook } from "./signing.ts";

/**
 * The dispatcher against a real HTTP receiver (node:http on loopback), whose signature checks are
 * the official `standardwebhooks` library's: signed payloads, redeliveries under one webhook-id
 * with backoff, giving up, timeouts and a stop in the middle of an attempt.
 */
const PERIOD = new Date().toISOString().slice(0, 7);
const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function setup(respond?: Respond, policy: { maxAttempts?: number; timeoutMs?: number } = {}) {
  const store: Store = createMemoryStore();
  const receiver: WebhookReceiver = await startWebhookReceiver(respond);
  opened.push(receiver);
  const secret = generateWebhookSecret();
  receiver.setSecret(secret);
  const accountId = "acct-1";
  await store.createAccount({
    id: accountId,
    spendCapUsdMicros: 1_000,
    onboardingComplete: true,
    paymentStatus: "ok",
    subscriptionStatus: "active",
    createTimeMs: Date.now(),
  });
  await store.webhooks.createEndpoint({ id: "whe_1", url: receiver.url, secret, createTimeMs: Date.now() });
  const dispatcher: WebhookDispatcher = createWebhookDispatcher({
    webhooks: store.webhooks,
    logger: silentLogger,
    now: Date.now,
    maxAttempts: policy.maxAttempts ?? 8,
    retryBaseMs: 10,
    timeoutMs: policy.timeoutMs ?? 5_000,
    pollMs: 1_000,
  });
  opened.push(dispatcher);
  let n = 0;
  const settle = (charge: number) =>
    store.settle({
      accountId,
      period: PERIOD,
      reservationId: `c${++n}`,
      chargeUsdMicros: charge,
      nowMs: Date.now(),
      alertPercents: [50, 80, 100],
    });
  const deliveries = () => store.webhooks.listDeliveries({ endpointId: "whe_1", pageSize: 10 });
  return { store, receiver, secret, settle, deliveries, dispatcher };
}

describe("webhook dispatcher", () => {
  it("delivers a raised alert, signed per Standard Webhooks, with the payload of the alert", async () => {
    const { receiver, secret, settle, deliveries } = await setup();
    const before = Date.now();
    await settle(600);
    const [got] = await receiver.until((r) => r.length === 1);
    expect(got?.verified).toBe(true);
    expect(got?.id).toMatch(/^evt_[0-9a-f]{32}$/);
    const ts = Number(got?.timestamp);
    expect(ts).toBeGreaterThanOrEqual(Math.floor(before / 1000));
    expect(got?.signature).toBe(signWebhook(secret, got?.id ?? "", ts, got?.body ?? ""));
    expect(got?.json).toEqual({
      type: "spend.threshold_crossed",
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      data: {
        account_id: "acct-1",
        scope: "account",
        period: PERIOD,
        threshold_percent: 50,
        cap_usd_micros: 1_000,
        spent_usd_micros: 600,
      },
    });
    await expect.poll(deliveries).toMatchObject([{ status: "delivered", attempts: 1, lastHttpStatus: 200 }]);
  });

  it("redelivers after failures under the same webhook-id, each attempt signed anew, until a 2xx", async () => {
    const { receiver, settle, deliveries } = await setup((i) => (i < 2 ? 500 : 204));
    await settle(900);
    const got = await receiver.until((r) => r.filter((x) => x.status === 204).length === 2);
    const byId = Map.groupBy(got, (r) => r.id);
    expect(byId.size).toBe(2);
    expect(got.every((r) => r.verified)).toBe(true);
    // Every delivery of one alert sends the same bytes.
    for (const tries of byId.values()) expect(new Set(tries.map((t) => t.body)).size).toBe(1);
    expect(got.map((r) => r.status).sort()).toEqual([204, 204, 500, 500]);
    await expect
      .poll(async () => (await deliveries()).map((d) => [d.status, d.lastHttpStatus]))
      .toEqual([
        ["delivered", 204],
        ["delivered", 204],
      ]);
    expect((await deliveries()).map((d) => d.attempts).reduce((a, b) => a + b)).toBe(4);
  });

  it("gives up after the last attempt and marks the delivery failed", async () => {
    const { receiver, settle, deliveries } = await setup(() => 503, { maxAttempts: 3 });
    await settle(500);
    await receiver.until((r) => r.length === 3);
    await expect
      .poll(deliveries)
      .toMatchObject([{ status: "failed", attempts: 3, lastHttpStatus: 503, lastError: "HTTP 503" }]);
    expect((await deliveries())[0]?.nextAttemptMs).toBeUndefined();
  });

  it("counts an endpoint that does not answer in time as a failed attempt", async () => {
    const { receiver, settle, deliveries } = await setup(() => "hang", { maxAttempts: 1, timeoutMs: 200 });
    await settle(500);
    await expect
      .poll(deliveries, { timeout: 5_000 })
      .toMatchObject([{ status: "failed", attempts: 1, lastError: "no answer within 200 ms" }]);
    expect(receiver.received).toEqual([]);
  });

  it("records an attempt its stop cut short, so that it is retried", async () => {
    let arrived = () => {};
    const hung = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const { settle, deliveries, dispatcher } = await setup(() => {
      arrived();
      return "hang";
    });
    await settle(500);
    await hung;
    await dispatcher.close();
    expect(await deliveries()).toMatchObject([
      { status: "pending", attempts: 1, lastError: "the sending process stopped" },
    ]);
  });

  it("backs off exponentially with jitter: about an hour over 8 attempts with the defaults", () => {
    const waits = (random: number) => [1, 2, 3, 4, 5, 6, 7].map((a) => retryDelayMs(a, 30_000, () => random));
    expect(waits(0.5)).toEqual([30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000]);
    expect(waits(0.5).reduce((a, b) => a + b)).toBe(3_810_000);
    expect(retryDelayMs(1, 30_000, () => 0)).toBe(24_000);
    expect(retryDelayMs(1, 30_000, () => 1)).toBe(36_000);
  });
});
