/**
 * Signing in and its failures, in a real browser against a real Sluice: each refused credential gets its
 * clear sentence (by the core's ErrorInfo reason), an empty one never leaves the form, the credential stays
 * out of URLs and cookies and is forgotten at sign-out, and paths the console does not know say so.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type App, startApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config/index.ts";
import { silentLogger } from "../../src/logger.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../support/harness.ts";
import { type Browser, launchBrowser, openPage, screenshot, signIn } from "./browser.ts";
import { consoleUrl } from "./calls.ts";

describe("signing in to the console", () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    [app, browser] = await Promise.all([startTestApp(), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("says an unknown API key is not valid", async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app));
    await page.getByLabel("API key or admin token").fill(`svc_sk_${"x".repeat(40)}`);
    await page.getByText("Detected: API key").waitFor();
    await page.getByRole("button", { name: "Sign in" }).click();
    const alert = page.getByRole("alert");
    await alert.waitFor();
    expect(await alert.textContent()).toBe("This API key is not valid: it is unknown, malformed, revoked or expired.");
    await screenshot(page, "error-state");
    expect(page.problems).toEqual([]);
  });

  it("says a wrong admin token is not valid", async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app));
    await page.getByLabel("API key or admin token").fill("not-the-admin-token-at-all");
    await page.getByText("Detected: admin token").waitFor();
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("This admin token is not valid").waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });

  it("blocks an empty credential in the form, without a request", async () => {
    const page = await openPage(browser);
    const rpcs: string[] = [];
    page.on("request", (r) => {
      if (new URL(r.url()).pathname.startsWith("/sluice.")) rpcs.push(r.url());
    });
    await page.goto(consoleUrl(app));
    await page.getByRole("button", { name: "Sign in" }).click();
    const input = page.getByLabel("API key or admin token");
    expect(await page.evaluate<boolean>('document.getElementById("credential").validity.valueMissing')).toBe(true);
    await input.fill("   ");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("Paste an API key or the admin token first.").waitFor();
    expect(rpcs).toEqual([]);
  });

  it("says when the key's rate limit refuses the console's calls, with the delay", async () => {
    const { apiKey } = await app.newAccount({ rps: 0.05, burst: 1 });
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    const alert = page.getByRole("alert");
    await alert.waitFor();
    expect(await alert.locator("p").textContent()).toMatch(
      /^Too many requests with this API key right now: its rate limit was reached\. Try again in \d+ seconds?\.$/,
    );
    await alert.getByRole("button", { name: "Try again" }).waitFor();
  });

  it("says when the server cannot be reached", async () => {
    const { apiKey } = await app.newAccount();
    const page = await openPage(browser);
    await page.route(/\/sluice\./, (route) => route.abort("connectionrefused"));
    await page.goto(consoleUrl(app));
    await page.getByLabel("API key or admin token").fill(apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("Cannot reach the Sluice server").waitFor();
  });

  it("keeps the credential out of URLs and cookies, and sign-out forgets it", async () => {
    const { apiKey } = await app.newAccount();
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await page.getByText("Signed in with an API key").waitFor();
    expect(page.url()).not.toContain(apiKey);
    expect(await page.evaluate("document.cookie")).toBe("");
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Billing" }).waitFor();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.goto(consoleUrl(app, "/usage"));
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
  });

  it("tells a revoked key apart on a page already signed in", async () => {
    const { apiKey, apiKeyId } = await app.newAccount();
    const page = await openPage(browser);
    await signIn(page, consoleUrl(app), apiKey, "Billing");
    await app.admin.revokeApiKey({ apiKeyId }, { headers: app.adminHeaders });
    await page.getByRole("link", { name: "Keys" }).click();
    await page.getByRole("alert").getByText("This API key is not valid").waitFor();
  });

  it("shows a not-found page for unknown paths, and the operator's notice on holder pages", async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app, "/no/such/page"));
    await page.getByRole("heading", { level: 1, name: "Page not found" }).waitFor();
    expect(await page.title()).toBe("Page not found · Sluice console");
    await page.getByRole("link", { name: "Go to the console home" }).click();
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    expect(page.url()).toBe(consoleUrl(app));

    await signIn(page, consoleUrl(app), ADMIN_TOKEN, "Accounts");
    await page.goto(consoleUrl(app, "/billing"));
    await page.getByRole("heading", { level: 1, name: "API key needed" }).waitFor();
  });
});

describe("signing in where the Admin API is off", () => {
  let app: App;
  let browser: Browser;
  beforeAll(async () => {
    const config = loadConfig({
      PORT: "0",
      GRPC_PORT: "0",
      METRICS_PORT: "0",
      HOST: "127.0.0.1",
      SLUICE_LOG: "silent",
      SLUICE_SHUTDOWN_GRACE_MS: "0",
    });
    [app, browser] = await Promise.all([startApp(config, { logger: silentLogger }), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("says the Admin API is off", async () => {
    const page = await openPage(browser);
    await page.goto(`${app.edgeUrl}/console/`);
    await page.getByLabel("API key or admin token").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("The Admin API is off on this server").waitFor();
  });
});

describe("signing in as operator where the public port keeps Admin off (SLUICE_PUBLIC_ADMIN=off)", () => {
  let app: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    [app, browser] = await Promise.all([startTestApp({ SLUICE_PUBLIC_ADMIN: "off" }), launchBrowser()]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("says the call is not offered on this port, while a key still signs in", async () => {
    const page = await openPage(browser);
    await page.goto(consoleUrl(app));
    await page.getByLabel("API key or admin token").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("the Admin API kept off this port").waitFor();
    const { apiKey } = await app.newAccount();
    await page.getByLabel("API key or admin token").fill(apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { level: 1, name: "Billing" }).waitFor();
  });
});
