/**
 * What the console tests do to Sluice besides driving the page: real chat calls on the public port, and
 * the ledger read back through the Admin API, which the page's figures must equal.
 */
import { expect } from "vitest";
import type { UsageRecord } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { TestApp } from "../support/harness.ts";

/** Makes one chat call with `apiKey` (on `model`, service-extract by default) and expects it to succeed. */
export async function chat(app: TestApp, apiKey: string, content: string, model = "service-extract"): Promise<void> {
  const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content }] }),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  await res.json();
}

/** Every usage record of the account, newest first, read through the Admin API. */
export async function ledger(app: TestApp, accountId: string): Promise<UsageRecord[]> {
  const records: UsageRecord[] = [];
  let pageToken = "";
  do {
    const page = await app.admin.listUsageRecords(
      { accountId, pageSize: 1000, pageToken },
      { headers: app.adminHeaders },
    );
    records.push(...page.usageRecords);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return records;
}

/** The sum of the records' costs, in micros. */
export function totalCost(records: readonly UsageRecord[]): bigint {
  return records.reduce((sum, r) => sum + r.costUsdMicros, 0n);
}

/** The console's address on this app. */
export function consoleUrl(app: TestApp, path = "/"): string {
  return `${app.edgeUrl}/console${path}`;
}
