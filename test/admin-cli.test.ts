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

  it("issues a key that expires and rotates it: with a grace both secrets work, without one the new only", async () => {
    const { account } = await app.admin.createAccount({ onboardingComplete: true }, { headers: app.adminHeaders });
    const me = async (secret: string) =>
      (await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${secret}` } })).status;
    type Issued = {
      apiKey: { id: string; prefix: string; expireTime?: string; previousPrefix?: string };
      secret: string;
    };
    const before = Date.now();
    const created = (await admin("create-key", account?.id ?? "", "--expires-in-seconds", "3600")) as Issued;
    const expires = Date.parse(created.apiKey.expireTime ?? "");
    expect(expires).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 3_600_000);
    expect(await me(created.secret)).toBe(200);

    const graced = (await admin("rotate-key", created.apiKey.id, "--grace-seconds", "600")) as Issued;
    expect(graced.apiKey).toMatchObject({ id: created.apiKey.id, previousPrefix: created.apiKey.prefix });
    expect(graced.apiKey.expireTime).toBe(created.apiKey.expireTime);
    expect([await me(created.secret), await me(graced.secret)]).toEqual([200, 200]);

    const abrupt = (await admin("rotate-key", created.apiKey.id)) as Issued;
    expect(abrupt.apiKey.previousPrefix).toBeUndefined();
    expect([await me(created.secret), await me(graced.secret), await me(abrupt.secret)]).toEqual([401, 401, 200]);
  });
});
