import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { connect } from "node:net";
import { networkInterfaces, platform } from "node:os";
import { dirname } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { loadConfig } from "../src/config/index.ts";
import { planDevStart } from "../src/dev-bootstrap.ts";

const run = promisify(execFile);
const STARTED = /Sluice edge on (http:\/\/\S+)\/v1, core \(gRPC\/Connect\/gRPC-Web\) on (http:\/\/\S+)/;
const BANNER_END = "export OPENAI_BASE_URL";
/** The banner's last line: an admin command that reads the export line's variables. */
const BANNER_DONE = /npm run admin -- get-account \S+\n/;
/** Variables of the test runner's own environment that would change what is under test. */
const INHERITED_OUT = [
  "HOST",
  "SLUICE_ADMIN_TOKEN",
  "REDIS_URL",
  "CORE_URL",
  "SLUICE_EDGE_TOKEN",
  "SLUICE_DEV_BOOTSTRAP",
  "SLUICE_MODELS",
];

/** One `node src/main.ts` child, as `npm start` runs it, with everything it writes to stdout and stderr. */
interface Main {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the output once it matches `pattern`; rejects if the process exits first. */
  waitFor(pattern: RegExp | string, timeoutMs?: number): Promise<string>;
}

const children: ChildProcess[] = [];

function startMain(env: Record<string, string>): Main {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !INHERITED_OUT.includes(k)));
  const child = spawn(process.execPath, ["src/main.ts"], {
    env: { ...base, PORT: "0", GRPC_PORT: "0", METRICS_PORT: "0", SLUICE_LOG: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  const listeners = new Set<() => void>();
  const collect = (d: Buffer) => {
    output += d.toString();
    for (const l of listeners) l();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  const waitFor = (pattern: RegExp | string, timeoutMs = 15_000) =>
    new Promise<string>((resolve, reject) => {
      const matches = () => (typeof pattern === "string" ? output.includes(pattern) : pattern.test(output));
      const timer = setTimeout(
        () => done(new Error(`no ${String(pattern)} within ${timeoutMs} ms; output:\n${output}`)),
        timeoutMs,
      );
      const check = () => {
        if (matches()) done();
      };
      const done = (err?: Error) => {
        clearTimeout(timer);
        listeners.delete(check);
        if (err) reject(err);
        else resolve(output);
      };
      listeners.add(check);
      void exited.then(({ code }) =>
        done(matches() ? undefined : new Error(`exited with ${code}; output:\n${output}`)),
      );
      check();
    });
  return { child, output: () => output, exited, waitFor };
}

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    c.kill("SIGTERM");
    await once(c, "exit");
  }
});

/** Whether a TCP connection to `host:port` is accepted (true) or refused (false). */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: 5_000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("timeout", () => {
      socket.destroy();
      reject(new Error(`no answer from ${host}:${port}`));
    });
    socket.once("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNREFUSED" ? resolve(false) : reject(err)));
  });
}

/**
 * A local address that is not 127.0.0.1: the machine's own non-loopback IPv4 when it has one,
 * else 127.0.0.2, which Linux routes to the loopback interface too. A server bound to 0.0.0.0
 * accepts on it; one bound to 127.0.0.1 refuses.
 */
const OTHER_LOCAL =
  Object.values(networkInterfaces())
    .flat()
    .find((a) => a?.family === "IPv4" && !a.internal)?.address ?? (platform() === "linux" ? "127.0.0.2" : undefined);

const portOf = (url: string) => Number(new URL(url).port);
const urls = (output: string) => {
  const m = STARTED.exec(output);
  if (!m?.[1] || !m[2]) throw new Error(`no start line in:\n${output}`);
  return { edgeUrl: m[1], coreUrl: m[2] };
};

describe("npm start on an empty memory store, no operator token (a developer's first run)", () => {
  let output = "";
  beforeAll(async () => {
    output = await startMain({}).waitFor(BANNER_DONE);
  });

  it("prints a key, an admin token and a curl line that answers", async () => {
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

  it("prints the console's URL, which serves the console page", async () => {
    const consoleUrl = /^ {2}console\s+(\S+)/m.exec(output)?.[1] ?? "";
    const { edgeUrl } = urls(output);
    // The public URL defaults to localhost on the edge's port.
    expect(consoleUrl).toBe(`http://localhost:${portOf(edgeUrl)}/console`);
    const res = await fetch(`${edgeUrl}/console`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await res.text()).toContain('<div id="app">');
  });

  it("prints an export line without CORE_URL, and an admin command that works after it", async () => {
    const lines = output.split("\n").map((l) => l.trim());
    const exportLine = lines.find((l) => l.startsWith("export ")) ?? "";
    const adminLine = lines.find((l) => l.includes("npm run admin -- get-account")) ?? "";
    const accountId = /^ {2}account\s+(\S+)$/m.exec(output)?.[1] ?? "";
    const { coreUrl } = urls(output);
    // Pasted into a shell, the line must not turn the next `npm start` there into an edge-only process.
    expect(exportLine).not.toContain("CORE_URL");
    // The core runs on a port of its own here, so the admin command names it for itself alone.
    expect(adminLine).toBe(`CORE_URL=${coreUrl} npm run admin -- get-account ${accountId}`);
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !INHERITED_OUT.includes(k)));
    const { stdout } = await run("bash", ["-c", `${exportLine}; echo "CORE_URL=\${CORE_URL-unset}"; ${adminLine}`], {
      env: { ...env, PATH: `${dirname(process.execPath)}:${env.PATH ?? ""}` },
    });
    expect(stdout).toContain("CORE_URL=unset");
    expect(stdout).toContain(`"id": "${accountId}"`);
    expect(stdout).toContain('"spendCapUsdMicros": "10000000"');
  });

  it("binds loopback only, since it runs on a token it made up", async () => {
    const { edgeUrl, coreUrl } = urls(output);
    expect(new URL(edgeUrl).hostname).toBe("127.0.0.1");
    expect(new URL(coreUrl).hostname).toBe("127.0.0.1");
    expect(await accepts("127.0.0.1", portOf(edgeUrl))).toBe(true);
    expect(OTHER_LOCAL, "this machine has no second local address to try").toBeDefined();
    for (const url of [edgeUrl, coreUrl]) {
      expect(await accepts(OTHER_LOCAL ?? "", portOf(url)), `${OTHER_LOCAL}:${portOf(url)}`).toBe(false);
    }
  });
});

describe("npm start with an operator's SLUICE_ADMIN_TOKEN", () => {
  const token = "operator-secret-admin-token-0123456789";

  it("never prints the token, and creates no dev account", async () => {
    const main = startMain({ SLUICE_ADMIN_TOKEN: token, SLUICE_LOG: "debug" });
    const { coreUrl } = urls(await main.waitFor(STARTED));
    // Admin runs on the operator's token: a lookup is answered (not found), not refused.
    const admin = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl }));
    const lookup = admin.getAccount({ accountId: randomUUID() }, { headers: { authorization: `Bearer ${token}` } });
    await expect(lookup).rejects.toSatisfy((err) => err instanceof ConnectError && err.code === Code.NotFound);
    // A graceful stop ends the run, so the output checked below is all there will ever be.
    main.child.kill("SIGTERM");
    expect(await main.exited).toEqual({ code: 0, signal: null });
    const output = main.output();
    expect(output).toMatch(STARTED);
    expect(output).not.toContain(token);
    expect(output).not.toContain("svc_sk_");
    expect(output).not.toContain("dev bootstrap");
    expect(output).not.toContain(BANNER_END);
  });
});

describe("npm start with HOST=0.0.0.0 and a made-up token", () => {
  it("binds what HOST says", async () => {
    const main = startMain({ HOST: "0.0.0.0" });
    const { edgeUrl, coreUrl } = urls(await main.waitFor(BANNER_END));
    expect(OTHER_LOCAL, "this machine has no second local address to try").toBeDefined();
    for (const url of [edgeUrl, coreUrl]) {
      expect(await accepts(OTHER_LOCAL ?? "", portOf(url)), `${OTHER_LOCAL}:${portOf(url)}`).toBe(true);
    }
  });
});

describe("planDevStart", () => {
  const plan = (env: Record<string, string>) => planDevStart(loadConfig(env));

  it("makes up a token and binds loopback only on a developer's first run", () => {
    const { config, madeUpToken } = plan({});
    expect(madeUpToken).toMatch(/^dev_\S{20,}$/);
    expect(config.SLUICE_ADMIN_TOKEN).toBe(madeUpToken);
    expect(config.HOST).toBe("127.0.0.1");
    expect(plan({ HOST: "0.0.0.0" }).config.HOST).toBe("0.0.0.0");
  });

  it("leaves an operator's config untouched and makes up nothing", () => {
    for (const env of [
      { SLUICE_ADMIN_TOKEN: "operator-secret-admin-token-0123456789" },
      { REDIS_URL: "redis://127.0.0.1:6379" },
      { CORE_URL: "http://core:50051", SLUICE_EDGE_TOKEN: "e".repeat(32) },
      { SLUICE_DEV_BOOTSTRAP: "off" },
    ]) {
      const config = loadConfig(env);
      expect(planDevStart(config)).toEqual({ config, madeUpToken: undefined });
      expect(config.HOST).toBeUndefined();
    }
  });
});

describe("npm start with a bad variable", () => {
  it("stops with a message naming it", async () => {
    const main = startMain({ PORT: "not-a-port" });
    const { code } = await main.exited;
    expect(code).toBe(1);
    expect(main.output()).toContain("PORT");
    expect(main.output()).not.toMatch(/at .*\.ts:\d+/);
  });
});
