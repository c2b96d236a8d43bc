import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdentityService } from "../gen/sluice/identity/v1/identity_service_pb.ts";
import { startApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config/index.ts";
import { silentLogger } from "../src/logger.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

const chat = (edgeUrl: string, key: string) =>
  fetch(`${edgeUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Edges and cores. Which one rules?" }] }),
  });

async function edgeOnly(coreUrl: string): Promise<App> {
  const config = loadConfig({
    PORT: "0",
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    CORE_URL: coreUrl,
    SLUICE_LOG: "silent",
  });
  return startApp(config, { logger: silentLogger });
}

describe("split deployment: edge-only processes reach the core at CORE_URL", () => {
  let core: TestApp;
  let edge: App;
  let second: App;

  beforeAll(async () => {
    core = await startTestApp();
    edge = await edgeOnly(core.coreUrl ?? "");
    second = await edgeOnly(core.coreUrl ?? "");
  });
  afterAll(async () => {
    await Promise.all([edge?.close(), second?.close()]);
    await core?.close();
  });

  it("serves /v1/me and chat through the remote core", async () => {
    const { accountId, apiKey } = await core.newAccount();
    const me = await fetch(`${edge.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(me.status).toBe(200);
    expect(await me.json()).toEqual({ id: accountId, email: null });
    const res = await chat(edge.edgeUrl, apiKey);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; usage: { total_tokens: number } };
    expect(body.object).toBe("chat.completion");
    expect(body.usage.total_tokens).toBeGreaterThan(0);
    expect(edge.store).toBeUndefined();
  });

  it("charges the rate limit once per chat call, via any edge: the key check is a named, uncharged step", async () => {
    // Burst 2 and a negligible refill: two allowed requests in all, whichever edges they come through.
    const caller = await core.newAccount({ rps: 0.001, burst: 2 });
    expect((await chat(edge.edgeUrl, caller.apiKey)).status).toBe(200);
    expect((await chat(second.edgeUrl, caller.apiKey)).status).toBe(200);
    const third = await chat(edge.edgeUrl, caller.apiKey);
    expect(third.status).toBe(429);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });

  it("an edge refuses to start against a core that has no CheckApiKey step, rather than charge twice", async () => {
    // An older core: it serves GetCaller but not the named key check.
    const old = createServer(
      connectNodeAdapter({ routes: (router) => router.service(IdentityService, { getCaller: () => ({ id: "x" }) }) }),
    );
    await new Promise<void>((resolve) => old.listen(0, "127.0.0.1", () => resolve()));
    try {
      const { port } = old.address() as AddressInfo;
      await expect(edgeOnly(`http://127.0.0.1:${port}`)).rejects.toThrow(/CheckApiKey/);
    } finally {
      await new Promise<void>((resolve) => old.close(() => resolve()));
    }
  });
});
