import { randomUUID } from "node:crypto";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { type AdminService, WebhookDeliveryStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { sluiceError } from "../../errors/catalogue.ts";
import type {
  AccountRecord,
  DeliveryStatus,
  Store,
  WebhookDelivery,
  WebhookEndpointRecord,
} from "../../store/store.ts";
import { generateWebhookSecret } from "../../webhooks/signing.ts";
import { pageSizeOf } from "../usage-records.ts";
import { invalidField } from "./key-times.ts";

/** The longest endpoint URL accepted: room for any real one, no room for a payload in disguise. */
const MAX_URL_LENGTH = 2048;

/** What the webhook RPCs need from Admin: the store, its clock, and its account lookup (404 for none). */
export interface WebhookAdminDeps {
  store: Store;
  now: () => number;
  mustGetAccount(accountId: string): Promise<AccountRecord>;
}

/** The Admin RPCs of spend alerts' webhooks. */
type WebhookRpcs = Pick<
  ServiceImpl<typeof AdminService>,
  "createWebhookEndpoint" | "listWebhookEndpoints" | "deleteWebhookEndpoint" | "listWebhookDeliveries"
>;

const STATUS: Record<DeliveryStatus, WebhookDeliveryStatus> = {
  pending: WebhookDeliveryStatus.PENDING,
  delivered: WebhookDeliveryStatus.DELIVERED,
  failed: WebhookDeliveryStatus.FAILED,
};

/** Admin's `WebhookEndpoint`: never the secret, which only `CreateWebhookEndpoint` shows, once. */
const endpointToProto = (e: WebhookEndpointRecord) => ({
  id: e.id,
  url: e.url,
  accountId: e.accountId ?? "",
  createTime: timestampFromMs(e.createTimeMs),
});

const deliveryToProto = (d: WebhookDelivery) => ({
  eventId: d.eventId,
  eventType: d.eventType,
  endpointId: d.endpointId,
  status: STATUS[d.status],
  attempts: d.attempts,
  lastHttpStatus: d.lastHttpStatus ?? 0,
  lastError: d.lastError ?? "",
  ...(d.nextAttemptMs !== undefined && { nextAttemptTime: timestampFromMs(d.nextAttemptMs) }),
  createTime: timestampFromMs(d.createTimeMs),
  updateTime: timestampFromMs(d.updateTimeMs),
});

/** An endpoint's URL, checked: http or https only (nothing else is ever fetched), and not too long. */
function urlOf(raw: string): string {
  if (raw.length > MAX_URL_LENGTH || !URL.canParse(raw)) throw invalidField("url", "must be an http or https URL");
  const url = new URL(raw);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw invalidField("url", "must be an http or https URL");
  return url.href;
}

/**
 * Webhook endpoints and their deliveries for the operator. A secret is made here, returned once,
 * and kept by the store to sign with; no other answer, and no log line, ever carries it.
 */
export function createWebhookAdmin(deps: WebhookAdminDeps): WebhookRpcs {
  const { store } = deps;
  const mustGetEndpoint = async (endpointId: string) => {
    const found = (await store.webhooks.listEndpoints()).find((e) => e.id === endpointId);
    if (!found) throw sluiceError("webhook_endpoint_not_found", { metadata: { endpoint_id: endpointId } });
    return found;
  };
  return {
    async createWebhookEndpoint(req) {
      const url = urlOf(req.url);
      const accountId = req.accountId === "" ? undefined : (await deps.mustGetAccount(req.accountId)).id;
      const secret = generateWebhookSecret();
      const endpoint: WebhookEndpointRecord = {
        id: `whe_${randomUUID().replaceAll("-", "")}`,
        url,
        ...(accountId !== undefined && { accountId }),
        secret,
        createTimeMs: deps.now(),
      };
      await store.webhooks.createEndpoint(endpoint);
      return { endpoint: endpointToProto(endpoint), secret };
    },

    async listWebhookEndpoints() {
      return { endpoints: (await store.webhooks.listEndpoints()).map(endpointToProto) };
    },

    async deleteWebhookEndpoint(req) {
      if (!(await store.webhooks.deleteEndpoint(req.endpointId)))
        throw sluiceError("webhook_endpoint_not_found", { metadata: { endpoint_id: req.endpointId } });
      return {};
    },

    async listWebhookDeliveries(req) {
      const pageSize = pageSizeOf(req.pageSize);
      const { id } = await mustGetEndpoint(req.endpointId);
      const deliveries = await store.webhooks.listDeliveries({ endpointId: id, pageSize });
      return { deliveries: deliveries.map(deliveryToProto) };
    },
  };
}
