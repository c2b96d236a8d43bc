import { execFile } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "admin.ts");

/** Runs `npm run admin -- <args>` as npm does, with only the variables given (and PATH). */
async function admin(args: string[], env: Record<string, string>) {
  const result = await run(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? "", ...env } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
  return { code: result.code, stdout: result.stdout, stderr: result.stderr };
}

/** A loopback port nothing listens on: one the OS just handed out and took back. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  await once(server, "close");
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

const TOKEN = { SLUICE_ADMIN_TOKEN: "t".repeat(32) };

describe("npm run admin", () => {
  it("says which core it could not reach, and how to point it elsewhere", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const { code, stderr } = await admin(["get-account", "a"], { ...TOKEN, CORE_URL: url });
    expect(code).toBe(1);
    expect(stderr).toContain(`admin: cannot reach the core at ${url}`);
    expect(stderr).toContain("set CORE_URL to its address");
  });

  it("refuses a CORE_URL that is not an http(s) URL, naming the variable", async () => {
    const { code, stderr } = await admin(["get-account", "a"], { ...TOKEN, CORE_URL: "core:50051" });
    expect(code).toBe(2);
    expect(stderr).toContain(
      'CORE_URL must be an http:// or https:// URL, such as http://127.0.0.1:50051 (got "core:50051")',
    );
  });

  it("names CORE_URL, not another variable, in its help", async () => {
    const { code, stdout } = await admin(["--help"], {});
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ {2}CORE_URL\s+the core's address \(default http:\/\/127\.0\.0\.1:50051/m);
    expect(stdout).not.toContain("SLUICE_CORE_URL");
  });

  it("stops before any call without SLUICE_ADMIN_TOKEN", async () => {
    const { code, stderr } = await admin(["get-account", "a"], {});
    expect(code).toBe(2);
    expect(stderr).toContain("SLUICE_ADMIN_TOKEN is not set");
  });

  it.each([
    ["rotate-key", "--grace-seconds", "1.5"],
    ["rotate-key", "--expires-in-seconds", "-1"],
    ["create-key", "--expires-in-seconds", "soon"],
  ])("%s refuses %s %s before any call, naming the flag", async (command, flag, value) => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const { code, stderr } = await admin([command, "some-id", `${flag}=${value}`], { ...TOKEN, CORE_URL: url });
    expect(code).toBe(2);
    expect(stderr).toContain(`admin: ${flag} must be a whole number of seconds`);
  });
});
