/**
 * Every console page passes axe-core with zero violations (WCAG A and AA, colour contrast included, and
 * axe's best practices), in the light and the dark colour scheme, in the states a user meets: empty,
 * filled, with an error, with a new key's secret, a rotation and a revocation to confirm.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../support/harness.ts";
import { axeViolations, type Browser, launchBrowser, openPage, signIn } from "./browser.ts";
import { chat, consoleUrl } from "./calls.ts";

/** Audits the page in both colour schemes; the failure message lists each violation. */
async function expectAccessible(page: Page, name: string): Promise<void> {
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    const violations = await axeViolations(page);
    expect(violations, `axe on ${name} (${colorScheme}):\n${violations.join("\n")}`).toEqual([]);
  }
  await page.emulateMedia({ colorScheme: "light" });
}

describe("console accessibility", () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    [app, browser] = await Promise.all([startTestApp(), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("has no axe violations on the signed-out pages", { timeout: 60_000 }, async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app));
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    await expectAccessible(page, "sign-in");
    await page.getByLabel("API key or admin token").fill("svc_sk_nope");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    await expectAccessible(page, "sign-in with an error");
    await page.goto(consoleUrl(app, "/status"));
    await page.getByText("Ready: Sluice is serving calls.").waitFor();
    await expectAccessible(page, "status");
    await page.goto(consoleUrl(app, "/nowhere"));
    await page.getByRole("heading", { level: 1, name: "Page not found" }).waitFor();
    await expectAccessible(page, "not found");
  });

  it("has no axe violations on the holder's pages", { timeout: 60_000 }, async () => {
    const { apiKey } = await app.newAccount();
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByText("No usage yet").waitFor();
    await expectAccessible(page, "usage, empty");
    await chat(app, apiKey, "One call for the tables.");
    await page.getByRole("link", { name: "Billing" }).click();
    await page.locator('[data-stat="spent"]').waitFor();
    await page.getByText("Spend by day as a table").click();
    await expectAccessible(page, "billing");
    await page.getByLabel("Message (sent as one user message)").fill("What would this cost?");
    await page.getByRole("button", { name: "Estimate" }).click();
    await page.locator('[data-estimate="admitted"]').waitFor();
    await expectAccessible(page, "billing with an estimate");
    await page.getByLabel("Model").fill("no-such-model");
    await page.getByRole("button", { name: "Estimate" }).click();
    await page.locator('[data-estimate="model_not_found"]').waitFor();
    await expectAccessible(page, "billing with a refused estimate");
    await page.getByLabel("Max tokens (optional)").fill("lots");
    await page.getByRole("button", { name: "Estimate" }).click();
    await page.getByRole("alert").waitFor();
    await expectAccessible(page, "billing with an estimate error");
    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator("table.usage tbody tr").first().waitFor();
    await expectAccessible(page, "usage");
    await page.getByRole("link", { name: "Keys" }).click();
    await page.locator("table.keys tbody tr").first().waitFor();
    await expectAccessible(page, "keys");
  });

  it("has no axe violations on the operator's pages", { timeout: 60_000 }, async () => {
    const { accountId } = await app.newAccount();
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), ADMIN_TOKEN, "Accounts");
    await expectAccessible(page, "accounts");
    await page.getByLabel("Account id or email").fill(accountId);
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("link", { name: "(no email)" }).waitFor();
    await expectAccessible(page, "accounts with a result");
    await page.getByRole("link", { name: "(no email)" }).click();
    await page.locator("table.keys tbody tr").first().waitFor();
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByLabel("Secret", { exact: true }).waitFor();
    await page
      .getByRole("button", { name: /^Revoke key svc_sk_/ })
      .first()
      .click();
    await page.getByRole("button", { name: "Revoke key", exact: true }).waitFor();
    await expectAccessible(page, "account with a secret and a revocation to confirm");
    await page
      .getByRole("button", { name: /^Rotate key svc_sk_/ })
      .first()
      .click();
    await page.getByLabel("Grace period for the old secret, in minutes").waitFor();
    await expectAccessible(page, "account with a rotation to confirm");
  });
});
