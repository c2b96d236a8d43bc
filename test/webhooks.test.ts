import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { WebhookDeliveryStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { startWebhookReceiver, type Respond, type WebhookReceiver } from "../src/testing/webhook-receiver.ts";
import { chatBody, chatOnce, pool } from "./support/chat-load.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./support/harness.ts";
import { balanceOf } from "./support/ledger.ts";
import { idsByLabel, reached } from "./support/webhooks.ts";

/**
 * Spend alerts end to end, on the store of the vitest project: chat calls through the edge cross
 * thresholds, and a real HTTP receiver gets them signed (checked with the official
 * `standardwebhooks` library), each threshold under one webhook-id however many calls race past
 * it, redelivered under that id after failures; endpoints are managed with the admin CLI.
 */
const run = promisify(execFile);
const CLI = join(import.meta.dirname, "../src/cli/admin.ts");
const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function setup(env: Record<string, string>, respond?: Respond) {
  const receiver: WebhookReceiver = await startWebhookReceiver(respond);
  opened.push(receiver);
  const app: TestApp = await startTestApp({ SLUICE_WEBHOOK_RETRY_BASE_MS: "20", ...env });
  opened.push(app);
  const headers = { headers: app.adminHeaders };
  const endpointFor = async (accountId = "") => {
    const made = await app.admin.createWebhookEndpoint({ url: receiver.url, accountId }, headers);
    receiver.setSecret(made.secret);
    return made.endpoint?.id ?? "";
  };
  const deliveries = async (endpointId: string) =>
    (await app.admin.listWebhookDeliveries({ endpointId, pageSize: 100 }, headers)).deliveries;
  return { receiver, app, headers, endpointFor, deliveries };
}

describe("spend alerts by webhook", () => {
  it("sends each threshold once, signed, when 120 calls over two keys race past them", async () => {
    const { receiver, app, headers, endpointFor, deliveries } = await setup({
      SLUICE_SPEND_ALERT_THRESHOLDS: "25,50,75,100",
    });
    const { accountId, apiKey } = await app.newAccount({ capUsdMicros: 3_000n, rps: 100_000, burst: 100_000 });
    const capped = await app.admin.createApiKey(
      { accountId, rateLimitRps: 100_000, burst: 100_000, spendCapUsdMicros: 1_500n },
      headers,
    );
    const keyId = capped.apiKey?.id ?? "";
    const endpointId = await endpointFor(accountId);
    const outcomes = await pool(120, 40, (i) =>
      chatOnce(app.edgeUrl, i % 2 === 0 ? capped.secret : apiKey, chatBody(i, i % 3 === 0, 16)),
    );
    expect(outcomes.filter((o) => o.kind === "other")).toEqual([]);
    const percents = [25, 50, 75, 100];
    const { spent } = await balanceOf(app, accountId);
    const { apiKeys } = await app.admin.listApiKeys({ accountId }, headers);
    const keySpent = apiKeys.find((k) => k.id === keyId)?.spentUsdMicros ?? 0n;
    const expected = [...reached(percents, 3_000n, spent), ...reached(percents, 1_500n, keySpent, keyId)].sort();
    // The calls used up most of both caps: 75 % of each at least.
    expect(expected.length).toBeGreaterThanOrEqual(6);
    await expect
      .poll(async () => (await deliveries(endpointId)).filter((d) => d.status === WebhookDeliveryStatus.DELIVERED))
      .toHaveLength(expected.length);
    const got = await receiver.until((r) => Object.keys(idsByLabel(r)).length >= expected.length);
    expect(Object.keys(idsByLabel(got))).toEqual(expected);
    expect(Object.values(idsByLabel(got)).every((n) => n === 1)).toBe(true);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(await deliveries(endpointId)).toHaveLength(expected.length);
  });

  it("redelivers under the same webhook-id after the receiver fails, until it answers 2xx", async () => {
    const { receiver, app, endpointFor, deliveries } = await setup({ SLUICE_SPEND_ALERT_THRESHOLDS: "25" }, (i) =>
      i < 2 ? 500 : 200,
    );
    const { accountId, apiKey } = await app.newAccount({ capUsdMicros: 40n });
    const endpointId = await endpointFor();
    const outcome = await chatOnce(app.edgeUrl, apiKey, {
      messages: [{ role: "user", content: "Hello there. How are you?" }],
      max_tokens: 4,
    });
    expect(outcome.kind).toBe("json");
    const got = await receiver.until((r) => r.some((x) => x.status === 200));
    expect(got.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(new Set(got.map((r) => r.id)).size).toBe(1);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got[2]?.json).toMatchObject({ data: { account_id: accountId, threshold_percent: 25 } });
    await expect.poll(async () => (await deliveries(endpointId))[0]?.status).toBe(WebhookDeliveryStatus.DELIVERED);
    expect(await deliveries(endpointId)).toMatchObject([
      { eventId: got[0]?.id, attempts: 3, lastHttpStatus: 200, lastError: "", eventType: "spend.threshold_crossed" },
    ]);
  });

  it("manages endpoints from the admin CLI, and lists their deliveries", async () => {
    const { receiver, app } = await setup({ SLUICE_SPEND_ALERT_THRESHOLDS: "25" });
    const env = { PATH: process.env.PATH ?? "", SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, CORE_URL: app.coreUrl ?? "" };
    const admin = async (...args: string[]) =>
      JSON.parse((await run(process.execPath, [CLI, ...args], { env })).stdout) as Record<string, unknown>;
    const { accountId, apiKey } = await app.newAccount({ capUsdMicros: 40n });
    const made = (await admin("create-webhook", receiver.url, "--account", accountId)) as {
      endpoint: { id: string; url: string; accountId: string };
      secret: string;
    };
    expect(made.endpoint).toMatchObject({ url: receiver.url, accountId });
    expect(made.secret).toMatch(/^whsec_/);
    receiver.setSecret(made.secret);
    // On Redis the file's apps share one server: the endpoints of earlier tests are listed too.
    const ids = async () => ((await admin("list-webhooks")) as { endpoints?: Array<{ id: string }> }).endpoints ?? [];
    const listed = await admin("list-webhooks");
    expect((await ids()).map((e) => e.id)).toContain(made.endpoint.id);
    expect(JSON.stringify(listed)).not.toContain("whsec_");
    await chatOnce(app.edgeUrl, apiKey, { messages: [{ role: "user", content: "Hello there." }], max_tokens: 4 });
    const [got] = await receiver.until((r) => r.length === 1);
    expect(got?.verified).toBe(true);
    await expect
      .poll(async () => ((await admin("webhook-deliveries", made.endpoint.id)) as { deliveries: unknown[] }).deliveries)
      .toMatchObject([{ eventId: got?.id, status: "WEBHOOK_DELIVERY_STATUS_DELIVERED", attempts: 1 }]);
    expect(await admin("delete-webhook", made.endpoint.id)).toEqual({});
    expect((await ids()).map((e) => e.id)).not.toContain(made.endpoint.id);
  });
});
