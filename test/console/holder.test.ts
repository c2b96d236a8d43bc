/**
 * The console as an account holder sees it, in a real browser against a real Sluice: sign in with an API
 * key, then billing, usage, keys and status. Figures are checked against the ledger (the Admin API's usage
 * records) after real chat calls, never against numbers the test made up.
 */
import { readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isoTime, USAGE_CSV_HEADER } from "../../console/src/csv.ts";
import { PaymentStatus } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { formatUsd } from "../../console/src/money.ts";
import { registryWith, scriptedEngine } from "../support/engines.ts";
import { startTestApp, type TestApp } from "../support/harness.ts";
import { type Browser, launchBrowser, openPage, screenshot, scrollsSideways, signIn } from "./browser.ts";
import { chat, consoleUrl, ledger, totalCost } from "./calls.ts";

/** The text of a figure on the billing page (`cap`, `spent`, `reserved` or `remaining`). */
const stat = (page: Page, name: string) => page.locator(`[data-stat="${name}"]`).textContent();

/** The usage table's row ids, in the order shown. */
const shownIds = (page: Page) =>
  page.locator("table.usage tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-id")));

/** Fails when the page is wider than the viewport, naming both widths. */
async function expectNoSidewaysScroll(page: Page): Promise<void> {
  const { scrollWidth, innerWidth } = await scrollsSideways(page);
  expect(scrollWidth, `page is ${scrollWidth}px wide in a ${innerWidth}px viewport`).toBeLessThanOrEqual(innerWidth);
}

describe("the console for an account holder", () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    [app, browser] = await Promise.all([startTestApp(), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("shows billing and usage, and both follow real calls to the ledger's numbers", { timeout: 60_000 }, async () => {
    const { accountId, apiKey } = await app.newAccount({ capUsdMicros: 2_500_000n });
    const page = await openPage(browser);
    await page.goto(consoleUrl(app));
    await screenshot(page, "sign-in");
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    expect(page.url()).toBe(consoleUrl(app, "/billing"));
    expect(await page.title()).toBe("Billing · Sluice console");
    await expect.poll(() => stat(page, "spent")).toBe("$0.00");
    expect(await stat(page, "cap")).toBe("$2.50");
    expect(await stat(page, "remaining")).toBe("$2.50");
    await page.locator('[data-standing="ok"]').waitFor();
    expect(await page.locator(".chart canvas").count()).toBeGreaterThan(0);

    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByText("No usage yet — make a call with your key").waitFor();

    for (const content of ["Sluice meters spend.", "Caps are monthly. Keys are rate limited.", "Hello there."]) {
      await chat(app, apiKey, content);
    }
    const records = await ledger(app, accountId);
    expect(records).toHaveLength(3);
    const spent = totalCost(records);
    expect(spent).toBeGreaterThan(0n);

    await page.reload();
    await page.locator("table.usage tbody tr").nth(2).waitFor();
    expect(await shownIds(page)).toEqual(records.map((r) => r.id));
    const costs = await page
      .locator("td[data-cost-micros]")
      .evaluateAll((cells) => cells.map((c) => c.getAttribute("data-cost-micros")));
    expect(costs).toEqual(records.map((r) => r.costUsdMicros.toString()));
    await screenshot(page, "usage");

    await page.getByRole("link", { name: "Billing" }).click();
    await expect.poll(() => stat(page, "spent")).toBe(formatUsd(spent));
    expect(await stat(page, "remaining")).toBe(formatUsd(2_500_000n - spent));
    expect(await stat(page, "reserved")).toBe("$0.00");
    await page.getByText("Spend by day as a table").click();
    const day = isoTime(records[0]?.createTime).slice(0, 10);
    const cells = page.locator(`tr[data-date="${day}"] td`);
    expect(await cells.nth(0).textContent()).toBe(formatUsd(spent));
    expect(await cells.nth(1).textContent()).toBe(formatUsd(spent));
    await screenshot(page, "billing");
    expect(page.problems).toEqual([]);
  });

  it("explains a standing that blocks calls, and who fixes it", async () => {
    const { accountId, apiKey } = await app.newAccount();
    await app.admin.updateAccount({ accountId, paymentStatus: PaymentStatus.FAILED }, { headers: app.adminHeaders });
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    const standing = page.locator('[data-standing="payment_failed"]');
    await standing.waitFor();
    expect(await standing.textContent()).toContain("The last invoice failed to charge");
    expect(await standing.textContent()).toContain("Your operator fixes this");
  });

  it("lists the holder's keys with their limits, and the per-call limits", async () => {
    const { apiKey, apiKeyId } = await app.newAccount({ rps: 4, burst: 6 });
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.getByRole("link", { name: "Keys" }).click();
    const row = page.locator(`tr[data-key-id="${apiKeyId}"]`);
    await row.waitFor();
    const prefix = ((await row.locator("td").nth(0).textContent()) ?? "").replace("…", "");
    expect(apiKey.startsWith(prefix) && prefix.length > 6).toBe(true);
    expect(await row.locator("td").nth(1).textContent()).toBe("4 rps");
    expect(await row.locator("td").nth(2).textContent()).toBe("6");
    expect(await row.locator("td").nth(3).textContent()).toBe("Active");
    const limits = await page.locator("section", { hasText: "Limits" }).textContent();
    expect(limits).toContain("32,768 tokens");
    expect(limits).toContain("32 MiB");
    await screenshot(page, "keys");
    expect(page.problems).toEqual([]);
  });

  it("shows a key's own cap, token limit and what it spent this month, from the ledger", async () => {
    const { accountId, apiKey, apiKeyId } = await app.newAccount();
    const limits = { apiKeyId, spendCapUsdMicros: 1_500_000n, tokensPerMinute: 50_000 };
    await app.admin.updateApiKey(limits, { headers: app.adminHeaders });
    await chat(app, apiKey, "Sluice meters spend. Keys have caps.");
    const spent = totalCost(await ledger(app, accountId));
    expect(spent).toBeGreaterThan(0n);
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.getByRole("link", { name: "Keys" }).click();
    const row = page.locator(`tr[data-key-id="${apiKeyId}"]`);
    await row.waitFor();
    expect(await row.locator("[data-key-cap]").textContent()).toBe("$1.50");
    expect(await row.locator("[data-key-spent]").textContent()).toBe(formatUsd(spent));
    expect(await row.textContent()).toContain("50,000");
    expect(page.problems).toEqual([]);
  });

  it("shows the service status signed out, from /readyz", async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app, "/status"));
    await page.getByText("Ready: Sluice is serving calls.").waitFor();
    expect(await page.title()).toBe("Service status · Sluice console");
    await screenshot(page, "status");
    expect(page.problems).toEqual([]);
  });

  it("pages the usage table and downloads every record as CSV", { timeout: 60_000 }, async () => {
    const { accountId, apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    await Promise.all(Array.from({ length: 27 }, (_, i) => chat(app, apiKey, `Call number ${i}. It is billed.`)));
    const records = await ledger(app, accountId);
    expect(records).toHaveLength(27);

    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator("table.usage tbody tr").nth(24).waitFor();
    expect(await shownIds(page)).toEqual(records.slice(0, 25).map((r) => r.id));
    await page.getByRole("button", { name: "Next page" }).click();
    await page.getByText("Page 2").waitFor();
    expect(await shownIds(page)).toEqual(records.slice(25).map((r) => r.id));
    expect(await page.getByRole("button", { name: "Next page" }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Previous page" }).click();
    await page.getByText("Page 1").waitFor();
    expect(await shownIds(page)).toHaveLength(25);

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download CSV of all records" }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^sluice-usage-\d{4}-\d{2}-\d{2}\.csv$/);
    const lines = (await readFile(await download.path(), "utf8")).split("\r\n").filter((l) => l !== "");
    expect(lines[0]).toBe(USAGE_CSV_HEADER.join(","));
    expect(lines).toHaveLength(1 + records.length);
    const byId = new Map(lines.slice(1).map((l) => [l.split(",")[0], l.split(",")]));
    for (const r of records) {
      expect(byId.get(r.id)).toEqual([
        r.id,
        isoTime(r.createTime),
        r.model,
        r.apiKeyId,
        r.promptTokens.toString(),
        r.completionTokens.toString(),
        r.costUsdMicros.toString(),
        `0.${r.costUsdMicros.toString().padStart(6, "0")}`,
      ]);
    }
    await page.getByText(`Downloaded ${records.length} records.`).waitFor();
    expect(page.problems).toEqual([]);
  });

  it("fits a 375px phone screen on billing and usage: no sideways page scroll", async () => {
    const { apiKey } = await app.newAccount();
    await chat(app, apiKey, "A call so the usage table has a row.");
    const page = await openPage(browser);
    await page.setViewportSize({ width: 375, height: 740 });
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.locator('[data-stat="spent"]').waitFor();
    await page.getByText("Spend by day as a table").click();
    await expectNoSidewaysScroll(page);
    await screenshot(page, "phone-billing");
    await page.getByRole("link", { name: "Usage" }).click();
    await page.locator("table.usage tbody tr").first().waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, "phone-usage");
    expect(page.problems).toEqual([]);
  });
});

describe("the billing page's forecast and call estimate", () => {
  /** 10.5 days into November 2026: the server's clock, so the forecast's date is known. */
  const NOW = Date.parse("2026-11-11T12:00:00Z");
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    // 100 micros per input token and 200 per output token, so figures are large enough to read.
    const models = registryWith([
      {
        name: "pricey",
        engine: scriptedEngine({ deltas: ["ok"] }),
        inputUsdMicrosPerMillion: 100_000_000,
        outputUsdMicrosPerMillion: 200_000_000,
      },
    ]);
    [app, browser] = await Promise.all([startTestApp({}, { models, now: () => NOW }), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  /** Fills the estimate form and submits it from the keyboard; `maxTokens` empty leaves it unset. */
  async function estimate(page: Page, model: string, message: string, maxTokens = ""): Promise<void> {
    await page.getByLabel("Model").fill(model);
    await page.getByLabel("Message (sent as one user message)").fill(message);
    await page.getByLabel("Max tokens (optional)").fill(maxTokens);
    await page.getByLabel("Model").press("Enter");
  }
  const figure = (page: Page, name: string) => page.locator(`[data-stat="estimate-${name}"]`).textContent();
  const forecast = (page: Page) => page.locator("[data-forecast]");

  it("forecasts the day the cap is reached, from the period's real spend", async () => {
    const { apiKey } = await app.newAccount({ capUsdMicros: 2_000n });
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await forecast(page).waitFor();
    expect(await forecast(page).getAttribute("data-forecast")).toBe("no-spend");
    // 7 prompt tokens at 100 and one output token at 200: 900 micros in 10.5 days, 85 a day.
    await chat(app, apiKey, "hi", "pricey");
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.locator('[data-forecast="date"]').waitFor();
    expect(await forecast(page).textContent()).toBe(
      "At this month's rate ($0.000085 a day) the cap is reached on 2026-11-24 (UTC).",
    );
    await chat(app, apiKey, "hi", "pricey");
    await page.getByRole("button", { name: "Refresh" }).click();
    // 1,800 of 2,000 spent at 171 a day: the last 200 take 1.2 days, the 12th.
    await expect
      .poll(() => forecast(page).textContent())
      .toBe("At this month's rate ($0.000171 a day) the cap is reached on 2026-11-12 (UTC).");
    expect(page.problems).toEqual([]);
  });

  it("estimates a call: the core's figures, then the refusals in words", { timeout: 60_000 }, async () => {
    const { apiKey } = await app.newAccount({ capUsdMicros: 2_000n, rps: 1000, burst: 1000 });
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await estimate(page, "pricey", "hi", "3");
    await page.locator('[data-estimate="admitted"]').waitFor();
    expect(await page.locator("[data-estimate]").textContent()).toContain("Would be admitted now.");
    expect(await figure(page, "prompt")).toBe("7");
    expect(await figure(page, "output")).toBe("3");
    // 7 * 100 + 3 * 200 micros; nothing is held, so the whole cap is left.
    expect(await figure(page, "cost")).toBe("$0.0013");
    expect(await figure(page, "left")).toBe("$0.002");
    await screenshot(page, "billing-estimate");

    await estimate(page, "nope", "hi");
    await page.locator('[data-estimate="model_not_found"]').waitFor();
    expect(await page.locator("[data-estimate]").textContent()).toContain("There is no model named “nope”");
    expect(await figure(page, "cost")).toBe("—");

    // 100 micros a prompt token: a long message outgrows what is left before it answers a token.
    await estimate(page, "pricey", "Sluice meters spend. Caps are monthly. Keys are rate limited.");
    await page.locator('[data-estimate="spend_cap_exceeded"]').waitFor();
    expect(await page.locator("[data-estimate]").textContent()).toContain("does not cover the prompt");

    await estimate(page, "pricey", "hi", "many");
    await page.getByRole("alert").getByText("Max tokens: Enter a whole number of tokens").waitFor();
    expect(await page.getByLabel("Max tokens (optional)").getAttribute("aria-invalid")).toBe("true");
    expect(page.problems).toEqual([]);
  });
});
