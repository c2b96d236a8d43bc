import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookDeliveryStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../src/testing/webhook-receiver.ts";
import { chatOnce } from "./support/chat-load.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";

/**
 * The webhook queue is durable on Redis: an app stopped while a delivery is still failing leaves
 * it queued, and a new app on the same Redis delivers it, under the same webhook-id. The file
 * spawns its own redis-server whatever SLUICE_TEST_STORE says, so it runs once.
 */
let redis: RedisServer;
let receiver: WebhookReceiver;
/** The receiver fails every request until the first app has stopped. */
const answer = { status: 500 };

beforeAll(async () => {
  redis = await startRedisServer();
  receiver = await startWebhookReceiver(() => answer.status);
});
afterAll(async () => {
  await receiver?.close();
  await redis?.close();
});

describe("a restart between attempts", () => {
  it("delivers the alert an app stopped with, from the next app on the same Redis", async () => {
    const env = { REDIS_URL: redis.url, SLUICE_SPEND_ALERT_THRESHOLDS: "25", SLUICE_WEBHOOK_RETRY_BASE_MS: "100" };
    const first: TestApp = await startTestApp(env);
    const { accountId, apiKey } = await first.newAccount({ capUsdMicros: 40n });
    const made = await first.admin.createWebhookEndpoint(
      { url: receiver.url, accountId },
      { headers: first.adminHeaders },
    );
    receiver.setSecret(made.secret);
    const endpointId = made.endpoint?.id ?? "";
    const reply = await chatOnce(first.edgeUrl, apiKey, {
      messages: [{ role: "user", content: "Hello there. How are you?" }],
      max_tokens: 4,
    });
    expect(reply.kind).toBe("json");
    await receiver.until((r) => r.length >= 2);
    await first.close();
    const failed = receiver.received.length;
    expect(receiver.received.every((r) => r.status === 500)).toBe(true);

    answer.status = 200;
    const second: TestApp = await startTestApp(env);
    try {
      const got = await receiver.until((r) => r.some((x) => x.status === 200));
      expect(new Set(got.map((r) => r.id)).size).toBe(1);
      expect(got.every((r) => r.verified)).toBe(true);
      const list = () => second.admin.listWebhookDeliveries({ endpointId }, { headers: second.adminHeaders });
      await expect.poll(async () => (await list()).deliveries[0]?.status).toBe(WebhookDeliveryStatus.DELIVERED);
      const [delivery] = (await list()).deliveries;
      expect(delivery).toMatchObject({ eventId: got[0]?.id, lastHttpStatus: 200 });
      // Every failed attempt, then the one that worked (and one the stop cut short, if it had one).
      expect(delivery?.attempts).toBeGreaterThanOrEqual(failed + 1);
      expect(got.filter((r) => r.status === 200)).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});
