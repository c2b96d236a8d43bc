/**
 * The console as the operator uses it, in a real browser against a real Sluice: sign in with the admin
 * token, open an account, issue a key whose secret is shown once, prove the key with real `curl` calls,
 * rotate it (both secrets work through the grace period), revoke it, and see curl refused for both. What the
 * page did is read back through the Admin API.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PaymentStatus } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../support/harness.ts";
import { type Browser, launchBrowser, openPage, screenshot, signIn } from "./browser.ts";
import { consoleUrl } from "./calls.ts";

const run = promisify(execFile);

/** One chat call with real curl; returns the HTTP status and the body. */
async function curlChat(app: TestApp, secret: string): Promise<{ status: number; body: string }> {
  const { stdout } = await run("curl", [
    "-sS",
    "-w",
    "\n%{http_code}",
    `${app.edgeUrl}/v1/chat/completions`,
    "-H",
    `Authorization: Bearer ${secret}`,
    "-H",
    "Content-Type: application/json",
    "-d",
    JSON.stringify({ model: "service-extract", messages: [{ role: "user", content: "Is this key live?" }] }),
  ]);
  const cut = stdout.lastIndexOf("\n");
  return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
}

describe("the console for the operator", () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    [app, browser] = await Promise.all([startTestApp(), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("creates an account and a key, the key works with curl, rotating keeps it working, revoking stops it", {
    timeout: 60_000,
  }, async () => {
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), ADMIN_TOKEN, "Accounts");
    expect(page.url()).toBe(consoleUrl(app, "/admin"));

    const email = `ops-${Date.now()}@example.com`;
    await page.getByLabel("Email (optional)").fill(email);
    await page.getByLabel("Monthly spend cap in US dollars (optional)").fill("5.50");
    await page.getByLabel("Onboarding complete").check();
    await page.getByRole("button", { name: "Create account" }).click();
    await page.getByRole("heading", { level: 2, name: email }).waitFor();
    const accountId = decodeURIComponent(new URL(page.url()).pathname.split("/").at(-1) ?? "");
    expect(page.url()).toBe(consoleUrl(app, `/admin/accounts/${accountId}`));
    const stored = (await app.admin.getAccount({ accountId }, { headers: app.adminHeaders })).account;
    expect(stored?.email).toBe(email);
    expect(stored?.spendCapUsdMicros).toBe(5_500_000n);
    expect(stored?.onboardingComplete).toBe(true);
    expect(await page.locator('[data-stat="cap"]').textContent()).toBe("$5.50");
    await page.getByText("No keys yet: issue one below.").waitFor();

    await page.getByLabel("Rate limit, requests per second (optional)").fill("5");
    await page.getByLabel("Burst (optional)").fill("7");
    await page.getByRole("button", { name: "Create key" }).click();
    const secretField = page.getByLabel("Secret", { exact: true });
    await secretField.waitFor();
    const secret = await secretField.inputValue();
    expect(secret).toMatch(/^svc_sk_/);
    await page.getByText("you won't see it again").waitFor();
    await page.locator("table.keys tbody tr").first().waitFor();
    expect(await page.locator("table.keys tbody tr td").nth(1).textContent()).toBe("5 rps");
    await screenshot(page, "admin-account");

    expect(await curlChat(app, secret)).toMatchObject({ status: 200 });

    await page.getByRole("button", { name: "I have saved it — hide the secret" }).click();
    expect(await page.getByLabel("Secret", { exact: true }).count()).toBe(0);

    await page.getByRole("button", { name: /^Rotate key svc_sk_/ }).click();
    await page.getByRole("heading", { name: /Rotate key .*\?/ }).waitFor();
    await page.getByLabel("Grace period for the old secret, in minutes").fill("5");
    await page.getByRole("button", { name: "Rotate key", exact: true }).click();
    await page.getByRole("heading", { name: "New secret issued" }).waitFor();
    const rotated = await page.getByLabel("Secret", { exact: true }).inputValue();
    expect(rotated).toMatch(/^svc_sk_/);
    expect(rotated).not.toBe(secret);
    await page.getByText(/Key .* rotated: its new secret is .*/).waitFor();
    await page.locator(`table.keys [data-previous-prefix="${secret.slice(0, 13)}"]`).waitFor();
    await screenshot(page, "admin-key-rotated");
    const [listed] = (await app.admin.listApiKeys({ accountId }, { headers: app.adminHeaders })).apiKeys;
    expect({ prefix: listed?.prefix, previous: listed?.previousPrefix }).toEqual({
      prefix: rotated.slice(0, 13),
      previous: secret.slice(0, 13),
    });
    expect(await curlChat(app, secret)).toMatchObject({ status: 200 });
    expect(await curlChat(app, rotated)).toMatchObject({ status: 200 });
    await page.getByRole("button", { name: "I have saved it — hide the secret" }).click();

    await page.getByRole("button", { name: /^Revoke key svc_sk_/ }).click();
    await page.getByRole("heading", { name: /Revoke key .*\?/ }).waitFor();
    await page.getByRole("button", { name: "Revoke key", exact: true }).click();
    await page.getByText(/Key .* revoked\./).waitFor();
    await page.locator("table.keys .badge.revoked").waitFor();

    for (const s of [secret, rotated])
      expect(await curlChat(app, s)).toEqual({ status: 401, body: '{"detail":"invalid_api_key"}' });

    // The three completed calls (one before the rotation, two after) show in the account's usage.
    await page.getByRole("region", { name: "Usage records" }).getByRole("button", { name: "Refresh" }).click();
    await page.locator("table.usage tbody tr").nth(2).waitFor();
    expect(await page.locator("table.usage tbody tr").count()).toBe(3);
    expect(page.problems).toEqual([]);
  });

  it("finds accounts by email and edits one's cap and payment status", { timeout: 60_000 }, async () => {
    const { accountId } = await app.newAccount({ capUsdMicros: 1_000_000n });
    const email = `billing-${Date.now()}@example.com`;
    // The harness makes accounts without email; give this one an email to search for.
    const { account } = await app.admin.createAccount(
      { email, onboardingComplete: true, spendCapUsdMicros: 1_000_000n },
      { headers: app.adminHeaders },
    );
    expect(account).toBeDefined();
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), ADMIN_TOKEN, "Accounts");

    await page.getByLabel("Account id or email").fill(email.toUpperCase());
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("link", { name: email }).waitFor();
    await screenshot(page, "admin-search");
    await page.getByLabel("Account id or email").fill("nobody@example.com");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByText("No account matches “nobody@example.com”").waitFor();

    await page.getByLabel("Account id or email").fill(accountId);
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("link", { name: "(no email)" }).click();
    await page.getByRole("heading", { level: 2, name: "Account without email" }).waitFor();
    expect(page.url()).toBe(consoleUrl(app, `/admin/accounts/${accountId}`));

    await page.getByLabel("Monthly spend cap in US dollars").fill("12.345678");
    await page.getByLabel("Payment status").selectOption({ label: "Failed: calls get 402 payment_failed" });
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    const stored = (await app.admin.getAccount({ accountId }, { headers: app.adminHeaders })).account;
    expect(stored?.spendCapUsdMicros).toBe(12_345_678n);
    expect(stored?.paymentStatus).toBe(PaymentStatus.FAILED);
    await expect.poll(() => page.locator('[data-stat="cap"]').textContent()).toBe("$12.345678");

    await page.getByLabel("Monthly spend cap in US dollars").fill("1.2345678");
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("alert").getByText("Use at most six decimal places").waitFor();
    expect(page.problems).toEqual([]);
  });
  it("sets and removes a key's own cap and token limit", { timeout: 60_000 }, async () => {
    const { accountId, apiKeyId } = await app.newAccount();
    const keyOf = async () =>
      (await app.admin.listApiKeys({ accountId }, { headers: app.adminHeaders })).apiKeys.find(
        (k) => k.id === apiKeyId,
      );
    const prefix = (await keyOf())?.prefix ?? "";
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), ADMIN_TOKEN, "Accounts");
    await page.goto(consoleUrl(app, `/admin/accounts/${accountId}`));
    await page.getByRole("button", { name: `Limits of key ${prefix}` }).click();
    await page.getByLabel("Key spend cap, US dollars a month (empty: only the account's cap applies)").fill("0.75");
    await page.getByLabel("Tokens per minute (empty: no token limit)").fill("6000");
    await page.getByRole("button", { name: "Save limits" }).click();
    await page.getByText(`Limits of key ${prefix}… saved.`).waitFor();
    expect(await keyOf()).toMatchObject({ spendCapUsdMicros: 750_000n, tokensPerMinute: 6000 });

    // Emptied fields remove the limits (the form sends an update mask), and the panel shows what is stored.
    await page.getByRole("button", { name: `Limits of key ${prefix}` }).click();
    const cap = page.getByLabel("Key spend cap, US dollars a month (empty: only the account's cap applies)");
    expect(await cap.inputValue()).toBe("0.75");
    await cap.fill("");
    await page.getByLabel("Tokens per minute (empty: no token limit)").fill("");
    await page.getByRole("button", { name: "Save limits" }).click();
    await page.getByText(`Limits of key ${prefix}… saved.`).waitFor();
    const cleared = await keyOf();
    expect(cleared?.spendCapUsdMicros).toBeUndefined();
    expect(cleared?.tokensPerMinute).toBeUndefined();
    expect(page.problems).toEqual([]);
  });
});
