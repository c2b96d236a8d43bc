import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { WebhookDeliveryStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);

/** Admin's webhook RPCs on a test core whose store the test can drive: endpoints, secrets and deliveries. */
describe("AdminService webhooks", () => {
  const setup = () => createCoreFixture({ now: () => NOW, spendAlertPercents: [50] });

  it("creates an endpoint with a secret shown once, lists endpoints without secrets, deletes them", async () => {
    const { admin, newAccount } = setup();
    const { accountId } = await newAccount();
    const made = await admin.createWebhookEndpoint({ url: "https://hooks.example/sluice", accountId }, ADMIN);
    expect(made.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(made.secret.slice(6), "base64")).toHaveLength(32);
    expect(made.endpoint?.id).toMatch(/^whe_[0-9a-f]{32}$/);
    expect(made.endpoint?.accountId).toBe(accountId);
    expect(Number(made.endpoint?.createTime?.seconds) * 1000).toBe(NOW);
    const every = await admin.createWebhookEndpoint({ url: "http://127.0.0.1:8000/hook" }, ADMIN);
    expect(every.endpoint?.accountId).toBe("");
    const { endpoints } = await admin.listWebhookEndpoints({}, ADMIN);
    expect(endpoints.map((e) => e.id)).toEqual([made.endpoint?.id, every.endpoint?.id]);
    expect(JSON.stringify(endpoints.map((e) => ({ ...e, createTime: undefined })))).not.toContain("whsec_");
    await admin.deleteWebhookEndpoint({ endpointId: made.endpoint?.id ?? "" }, ADMIN);
    expect((await admin.listWebhookEndpoints({}, ADMIN)).endpoints.map((e) => e.id)).toEqual([every.endpoint?.id]);
    await expectFailure(
      () => admin.deleteWebhookEndpoint({ endpointId: made.endpoint?.id ?? "" }, ADMIN),
      Code.NotFound,
      "webhook_endpoint_not_found",
    );
  });

  it("refuses URLs other than http and https, and unknown accounts", async () => {
    const { admin } = setup();
    for (const url of [
      "ftp://hooks.example/x",
      "file:///etc/passwd",
      "not a url",
      `https://x.example/${"a".repeat(2100)}`,
    ]) {
      const err = await expectFailure(
        () => admin.createWebhookEndpoint({ url }, ADMIN),
        Code.InvalidArgument,
        "invalid_argument",
      );
      expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.field).toBe("url");
    }
    await expectFailure(
      () => admin.createWebhookEndpoint({ url: "https://x.example/", accountId: crypto.randomUUID() }, ADMIN),
      Code.NotFound,
      "account_not_found",
    );
  });

  it("lists an endpoint's deliveries with their status; an unknown endpoint is 404", async () => {
    const { admin, newAccount, store, completion } = setup();
    const key = await newAccount({ capUsdMicros: 30n });
    const { endpoint } = await admin.createWebhookEndpoint({ url: "https://hooks.example/x" }, ADMIN);
    const endpointId = endpoint?.id ?? "";
    // One call spends more than half of the cap of 30: the 50 % alert is raised by its settle.
    const reply = await completion.createChatCompletion(
      { params: { messages: [{ role: "user", content: "Sluice meters spend. Caps are monthly." }] } },
      key.call,
    );
    expect(reply.usage?.costUsdMicros).toBeGreaterThanOrEqual(15n);
    await store.webhooks.fanOut({ consumer: "t", nowMs: NOW, max: 10, claimIdleMs: 1 });
    const { deliveries } = await admin.listWebhookDeliveries({ endpointId }, ADMIN);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({
      eventId: expect.stringMatching(/^evt_/),
      eventType: "spend.threshold_crossed",
      endpointId,
      status: WebhookDeliveryStatus.PENDING,
      attempts: 0,
      lastHttpStatus: 0,
      lastError: "",
    });
    expect(Number(deliveries[0]?.nextAttemptTime?.seconds) * 1000).toBe(NOW);
    await expectFailure(
      () => admin.listWebhookDeliveries({ endpointId: "whe_nope" }, ADMIN),
      Code.NotFound,
      "webhook_endpoint_not_found",
    );
    await expectFailure(
      () => admin.listWebhookDeliveries({ endpointId, pageSize: -1 }, ADMIN),
      Code.InvalidArgument,
      "invalid_argument",
    );
  });
});
