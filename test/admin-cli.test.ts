import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./support/harness.ts";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "../src/cli/admin.ts");

describe("npm run admin: the console's operator lookups from a shell", () => {
  let app: TestApp;
  const admin = async (...args: string[]) => {
    const env = { PATH: process.env.PATH ?? "", SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, CORE_URL: app.coreUrl ?? "" };
    const { stdout } = await run(process.execPath, [CLI, ...args], { env });
    return JSON.parse(stdout) as Record<string, unknown>;
  };
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("finds an account by its email, ignoring case, and charts its spend by day", async () => {
    const { account } = await app.admin.createAccount(
      { email: "Ops@Example.com", onboardingComplete: true, spendCapUsdMicros: 1_000_000n },
      { headers: app.adminHeaders },
    );
    const id = account?.id ?? "";
    const { secret } = await app.admin.createApiKey({ accountId: id }, { headers: app.adminHeaders });
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Count me. Chart me." }] }),
    });
    expect(res.status).toBe(200);
    const found = await admin("search-accounts", " ops@EXAMPLE.com ");
    expect((found.accounts as { id: string }[]).map((a) => a.id)).toEqual([id]);
    const before = new Date().toISOString().slice(0, 10);
    const chart = (await admin("spend-by-day", id)) as {
      days: { date: string; spentUsdMicros?: string }[];
      spentUsdMicros: string;
    };
    const after = new Date().toISOString().slice(0, 10);
    const summed = chart.days.reduce((sum, d) => sum + Number(d.spentUsdMicros ?? 0), 0);
    expect(summed).toBeGreaterThan(0);
    expect(summed).toBe(Number(chart.spentUsdMicros));
    // Every day from the 1st to today (read on either side of the call: midnight may pass).
    expect([before, after]).toContain(chart.days.at(-1)?.date);
    expect(chart.days.length).toBe(Number(chart.days.at(-1)?.date.slice(8)));
  });
});
