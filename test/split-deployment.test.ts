import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config/index.ts";
import { silentLogger } from "../src/logger.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

const EDGE_TOKEN = "split-edge-token-0123456789abcdefghij";
const chat = (edgeUrl: string, key: string) => fetch(`${edgeUrl}/v1/chat/completions`, {
  method: "POST",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  body: JSON.stringify({ messages: [{ role: "user", content: "Edges and cores. Which one rules?" }] }),
});

async function edgeOnly(coreUrl: string, token: string): Promise<App> {
  const config = loadConfig({ PORT: "0", METRICS_PORT: "0", HOST: "127.0.0.1", CORE_URL: coreUrl, SLUICE_EDGE_TOKEN: token, SLUICE_LOG: "silent" });
  return startApp(config, { logger: silentLogger });
}

describe("split deployment: edge-only processes reach the core at CORE_URL", () => {
  let core: TestApp;
  let edge: App;
  let impostor: App;

  beforeAll(async () => {
    core = await startTestApp({ SLUICE_EDGE_TOKEN: EDGE_TOKEN });
    edge = await edgeOnly(core.coreUrl ?? "", EDGE_TOKEN);
    impostor = await edgeOnly(core.coreUrl ?? "", `${EDGE_TOKEN}-wrong`);
  });
  afterAll(async () => {
    await Promise.all([edge?.close(), impostor?.close()]);
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

  it("charges the rate limit once per chat call for a trusted edge, twice for an impostor", async () => {
    // Burst 2 and a negligible refill: two admissions in all.
    const trusted = await core.newAccount({ rps: 0.001, burst: 2 });
    expect((await chat(edge.edgeUrl, trusted.apiKey)).status).toBe(200);
    expect((await chat(edge.edgeUrl, trusted.apiKey)).status).toBe(200);
    expect((await chat(edge.edgeUrl, trusted.apiKey)).status).toBe(429);

    const other = await core.newAccount({ rps: 0.001, burst: 2 });
    expect((await chat(impostor.edgeUrl, other.apiKey)).status).toBe(200);
    const second = await chat(impostor.edgeUrl, other.apiKey);
    expect(second.status).toBe(429);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });
});
