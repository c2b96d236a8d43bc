import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);

/** Starts `node src/main.ts` as `npm start` does and collects its stdout until the banner is complete. */
async function start(env: Record<string, string>): Promise<{ child: ChildProcess; output: string }> {
  const child = spawn(process.execPath, ["src/main.ts"], {
    env: { ...process.env, PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", HOST: "127.0.0.1", SLUICE_LOG: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner in time; got:\n${output}`)), 15_000);
    child.stdout?.on("data", (d: Buffer) => {
      output += d.toString();
      if (output.includes("export OPENAI_BASE_URL")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`exited with ${code}; output:\n${output}`)));
  });
  await done;
  return { child, output };
}

describe("npm start on an empty memory store", () => {
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of children) {
      c.kill("SIGTERM");
      if (c.exitCode === null) await once(c, "exit");
    }
  });

  it("prints a key, an admin token and a curl line that answers", async () => {
    const { child, output } = await start({});
    children.push(child);
    const key = /API key\s+(svc_sk_\w+)/.exec(output)?.[1];
    expect(key).toMatch(/^svc_sk_[0-9A-Za-z]{49}$/);
    expect(output).toMatch(/admin token\s+dev_\S{20,}/);
    const curlLine = output.split("\n").find((l) => l.trim().startsWith("curl "));
    expect(curlLine).toBeDefined();
    const { stdout } = await run("bash", ["-c", `${curlLine} -w '\\n%{http_code}'`]);
    const [body, status] = [stdout.slice(0, stdout.lastIndexOf("\n")), stdout.slice(stdout.lastIndexOf("\n") + 1)];
    expect(status).toBe("200");
    const reply = JSON.parse(body) as { object: string; choices: { message: { content: string } }[] };
    expect(reply.object).toBe("chat.completion");
    expect(reply.choices[0]?.message.content.length).toBeGreaterThan(0);
  });

  it("stops with a message naming a bad variable", async () => {
    const child = spawn(process.execPath, ["src/main.ts"], { env: { ...process.env, PORT: "not-a-port" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => { stderr += d.toString(); });
    const [code] = (await once(child, "exit")) as [number];
    expect(code).toBe(1);
    expect(stderr).toContain("PORT");
    expect(stderr).not.toMatch(/at .*\.ts:\d+/);
  });
});
