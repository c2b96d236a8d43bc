import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./support/harness.ts";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "../src/cli/admin.ts");

/** `npm run admin -- create-key --cap-usd --tpm` and `update-key`: a key's own limits from a shell. */
describe("npm run admin: a key's own cap and token limit", () => {
  let app: TestApp;
  const cli = (args: string[]) => {
    const env = { PATH: process.env.PATH ?? "", SLUICE_ADMIN_TOKEN: ADMIN_TOKEN, CORE_URL: app.coreUrl ?? "" };
    return run(process.execPath, [CLI, ...args], { env }).then(
      ({ stdout }) => ({ code: 0, stdout, stderr: "" }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
  };
  const admin = async (...args: string[]) => {
    const { code, stdout, stderr } = await cli(args);
    if (code !== 0) throw new Error(stderr);
    return JSON.parse(stdout) as { apiKey: Record<string, unknown> };
  };
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("issues a key with a cap in dollars and a token limit, then changes and removes them", async () => {
    const { account } = await app.admin.createAccount({ onboardingComplete: true }, { headers: app.adminHeaders });
    const created = await admin("create-key", account?.id ?? "", "--cap-usd", "2.5", "--tpm", "40000");
    expect(created.apiKey).toMatchObject({ spendCapUsdMicros: "2500000", tokensPerMinute: 40000 });
    const id = String(created.apiKey.id);
    const lowered = await admin("update-key", id, "--cap-micros", "1200");
    expect(lowered.apiKey).toMatchObject({ spendCapUsdMicros: "1200", tokensPerMinute: 40000 });
    const uncapped = await admin("update-key", id, "--no-cap", "--tpm", "90");
    expect(uncapped.apiKey.spendCapUsdMicros).toBeUndefined();
    expect(uncapped.apiKey.tokensPerMinute).toBe(90);
    const unlimited = await admin("update-key", id, "--no-tpm");
    expect(unlimited.apiKey.tokensPerMinute).toBeUndefined();
    const listed = await app.admin.listApiKeys({ accountId: account?.id ?? "" }, { headers: app.adminHeaders });
    expect(listed.apiKeys[0]?.spendCapUsdMicros).toBeUndefined();
  });

  it.each([
    [["update-key", "key_x"], "update-key needs --cap-usd"],
    [["update-key", "key_x", "--no-cap", "--cap-usd", "1"], "--no-cap and a cap cannot go together"],
    [["update-key", "key_x", "--tpm", "0"], "--tpm must be a whole number of tokens >= 1"],
    [["create-key", "acct", "--tpm", "lots"], "--tpm must be a whole number of tokens >= 1"],
  ])("refuses %j before any call", async (args, message) => {
    const { code, stderr } = await cli(args);
    expect(code).toBe(2);
    expect(stderr).toContain(`admin: ${message}`);
  });
});
