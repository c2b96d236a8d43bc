/**
 * Drives the console in a real headless Chromium for the browser tests: a launch with a fresh profile per
 * browser, screenshots into `test-artifacts/console`, an axe-core audit, and a guard that fails a test on
 * uncaught page errors or Content-Security-Policy refusals. A missing Chromium fails the suite loudly: the
 * console's promises are only checked in a browser, so skipping would pass without proving anything.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

/** Where the tests expect Chromium (the Debian `chromium` package). */
export const CHROMIUM = "/usr/bin/chromium";

/** Where screenshots go; gitignored. */
export const ARTIFACTS = join(import.meta.dirname, "..", "..", "test-artifacts", "console");

const AXE_SCRIPT = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

/** A launched browser: its one context, and `close` to end it and remove its profile. */
export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Launches headless Chromium with a profile of its own, made for this launch and removed by `close`. */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`the console browser tests need Chromium at ${CHROMIUM} (apt-get install chromium); none found`);
  }
  const profile = await mkdtemp(join(tmpdir(), "sluice-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-gpu",
      "--no-first-run",
    ],
    viewport: { width: 1280, height: 900 },
    acceptDownloads: true,
    locale: "en-US",
    timezoneId: "UTC",
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** A new tab (so a new, signed-out session) that records page errors and CSP refusals. */
export async function openPage(browser: Browser): Promise<Page & { problems: string[] }> {
  const page = await browser.context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (/Content Security Policy|Refused to/i.test(msg.text())) problems.push(`CSP: ${msg.text()}`);
  });
  return Object.assign(page, { problems });
}

/** Saves a full-page screenshot as `test-artifacts/console/<name>.png`. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** One axe violation, shaped for a readable failure message. */
interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[]; failureSummary?: string }[];
}

/**
 * Runs axe-core on the page as it is now and returns its violations as lines (rule, impact, help and the
 * elements), empty when there are none.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  // Page code is passed as strings: the tests' TypeScript has no DOM library.
  const loaded = await page.evaluate<boolean>('"axe" in window');
  // Evaluated, not added as a <script>: the console's Content-Security-Policy refuses inline scripts.
  if (!loaded) await page.evaluate(await readFile(AXE_SCRIPT, "utf8"));
  const violations = await page.evaluate<AxeViolation[]>("axe.run(document).then((result) => result.violations)");
  return violations.map((v) => {
    const where = v.nodes.map((n) => `${JSON.stringify(n.target)} ${n.failureSummary ?? ""}`).join("; ");
    return `${v.id} (${v.impact}): ${v.help} at ${where}`;
  });
}

/** Whether the page scrolls sideways: its content is wider than the viewport. */
export async function scrollsSideways(page: Page): Promise<{ scrollWidth: number; innerWidth: number }> {
  return page.evaluate("({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth })");
}

/** Signs in through the form with `credential` and waits for the page the session lands on. */
export async function signIn(page: Page, consoleUrl: string, credential: string, lands: string): Promise<void> {
  await page.goto(consoleUrl);
  await page.getByLabel("API key or admin token").fill(credential);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: lands }).waitFor();
}
