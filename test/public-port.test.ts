import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.ts";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { BillingService } from "../gen/sluice/billing/v1/billing_service_pb.ts";
import { IdentityService } from "../gen/sluice/identity/v1/identity_service_pb.ts";
import { startApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config/index.ts";
import { CATALOGUE, type Reason, retryAfterMsOf } from "../src/errors/catalogue.ts";
import { docsUrlOf, errorBody, portalUrlOf } from "../src/errors/envelope.ts";
import { silentLogger } from "../src/logger.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "./support/harness.ts";
import { freePort } from "./support/redis-server.ts";

/** The client the console uses, over `fetch`, against one origin. */
const webClients = (origin: string, credential?: string) => {
  const transport = createConnectTransport({
    baseUrl: origin,
    interceptors: credential
      ? [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${credential}`);
            return next(req);
          },
        ]
      : [],
  });
  return {
    identity: createClient(IdentityService, transport),
    billing: createClient(BillingService, transport),
    admin: createClient(AdminService, transport),
  };
};

/** The code and `ErrorInfo.reason` a call failed with. */
async function failure(call: Promise<unknown>): Promise<{ code: Code; reason: string | undefined; err: ConnectError }> {
  const err = await call.then(
    () => {
      throw new Error("the call succeeded");
    },
    (e: unknown) => ConnectError.from(e),
  );
  return { code: err.code, reason: err.findDetails(ErrorInfoSchema)[0]?.reason, err };
}

const edgeOnly = (coreUrl: string, env: Record<string, string> = {}) =>
  startApp(
    loadConfig({ PORT: "0", METRICS_PORT: "0", HOST: "127.0.0.1", CORE_URL: coreUrl, SLUICE_LOG: "silent", ...env }),
    { logger: silentLogger },
  );

describe("the public port: error pages, console files and the console's Connect calls", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("follows every link of every catalogue error to a 200 page", async () => {
    const links = { publicUrl: app.publicUrl };
    expect(app.publicUrl).toBe(`http://localhost:${new URL(app.edgeUrl).port}`);
    const followed = new Set<string>();
    for (const reason of Object.keys(CATALOGUE) as Reason[]) {
      const body = errorBody(reason, links);
      const urls = [docsUrlOf(reason, links)];
      if (typeof body === "object" && "error" in body) {
        const { docs_url, resolution_url, portal_url } = (body as { error: Record<string, string> }).error;
        urls.push(String(docs_url), String(resolution_url), String(portal_url));
      }
      for (const url of urls) {
        const res = await fetch(url);
        expect(res.status, url).toBe(200);
        expect(res.headers.get("content-type"), url).toBe("text/html; charset=utf-8");
        const html = await res.text();
        if (url === docsUrlOf(reason, links)) {
          expect(html).toContain(`<h1><code>${reason}</code></h1>`);
          expect(html).toContain(`<dt>HTTP status</dt><dd>${CATALOGUE[reason].http}`);
          expect(html).toContain("<h2>Example response</h2>");
        }
        followed.add(url);
      }
    }
    expect(followed).toContain(`${app.publicUrl}/console/billing`);
    expect(followed).toContain(`${app.publicUrl}/console/keys`);
    expect(followed).toContain(`${app.publicUrl}/console/status`);
    expect(followed).toContain(portalUrlOf(links));
  });

  it("links a real 402 to its pages, and the index lists every code", async () => {
    const { apiKey } = await app.newAccount({ onboarded: false, capUsdMicros: undefined });
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "service-extract", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(402);
    const { error } = (await res.json()) as { error: Record<string, string> };
    expect(error.docs_url).toBe(`${app.publicUrl}/docs/errors/onboarding_incomplete`);
    expect(error.resolution_url).toBe(`${app.publicUrl}/console/billing`);
    expect(error.portal_url).toBe(`${app.publicUrl}/console`);
    for (const url of [error.docs_url, error.resolution_url, error.portal_url])
      expect((await fetch(String(url))).status, url).toBe(200);
    const index = await (await fetch(`${app.publicUrl}/docs/errors`)).text();
    for (const reason of Object.keys(CATALOGUE)) expect(index).toContain(`href="/docs/errors/${reason}"`);
    expect((await fetch(`${app.publicUrl}/docs/errors/no_such_code`)).status).toBe(404);
  });

  it("answers the console's Connect calls same-origin, through the core's own rules", async () => {
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: 5_000_000n });
    const holder = webClients(app.edgeUrl, apiKey);
    expect((await holder.identity.getCaller({})).id).toBe(accountId);
    const balance = await holder.billing.getBalance({});
    expect(balance.spendCapUsdMicros).toBe(5_000_000n);

    const stranger = webClients(app.edgeUrl, "svc_sk_notarealkey");
    expect(await failure(stranger.billing.getBalance({}))).toMatchObject({
      code: Code.Unauthenticated,
      reason: "invalid_api_key",
    });
    expect(await failure(webClients(app.edgeUrl, apiKey).admin.searchAccounts({ query: accountId }))).toMatchObject({
      code: Code.Unauthenticated,
      reason: "invalid_admin_token",
    });
    const operator = webClients(app.edgeUrl, ADMIN_TOKEN);
    const found = await operator.admin.searchAccounts({ query: accountId });
    expect(found.accounts.map((a) => a.id)).toEqual([accountId]);
  });

  it("charges the key's rate limit on a console call, with RetryInfo", async () => {
    const { apiKey } = await app.newAccount({ rps: 0.01, burst: 1 });
    const holder = webClients(app.edgeUrl, apiKey);
    await holder.billing.getBalance({});
    const { code, reason, err } = await failure(holder.billing.getBalance({}));
    expect({ code, reason }).toEqual({ code: Code.ResourceExhausted, reason: "api_key_rate_limited" });
    expect(retryAfterMsOf(err)).toBeGreaterThan(0);
  });

  it("forwards neither chat RPCs nor other paths, and adds no CORS headers", async () => {
    const { apiKey } = await app.newAccount();
    const chat = await fetch(`${app.edgeUrl}/sluice.completion.v1.CompletionService/ListModels`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(chat.status).toBe(404);
    const preflight = await fetch(`${app.edgeUrl}/sluice.billing.v1.BillingService/GetBalance`, {
      method: "OPTIONS",
      headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(405);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    const cross = await fetch(`${app.edgeUrl}/sluice.billing.v1.BillingService/GetBalance`, {
      method: "POST",
      headers: {
        origin: "https://evil.example",
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
      },
      body: "{}",
    });
    expect(cross.status).toBe(200);
    expect(cross.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("serves the console: any page path, hashed assets cached for good and compressed, strict headers", async () => {
    const page = await fetch(`${app.edgeUrl}/console/billing`);
    expect(page.status).toBe(200);
    expect(page.headers.get("cache-control")).toBe("no-cache");
    expect(page.headers.get("content-security-policy")).toContain("connect-src 'self'");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const html = await page.text();
    expect(await (await fetch(`${app.edgeUrl}/console`)).text()).toBe(html);
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script, "index.html loads a hashed script").toBeDefined();
    const asset = await fetch(`${app.edgeUrl}${script}`, { headers: { "accept-encoding": "gzip" } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-encoding")).toBe("gzip");
    const etag = asset.headers.get("etag") ?? "";
    expect((await fetch(`${app.edgeUrl}${script}`, { headers: { "if-none-match": etag } })).status).toBe(304);
    expect((await fetch(`${app.edgeUrl}/console/assets/missing-0000.js`)).status).toBe(404);
    expect((await fetch(`${app.edgeUrl}/console`, { method: "POST" })).status).toBe(405);
  });
});

describe("the public port of an edge-only process", () => {
  let core: TestApp;
  let edge: App | undefined;
  afterAll(async () => {
    await edge?.close();
    await core?.close();
  });

  it("serves the console and forwards its calls to the core at CORE_URL", async () => {
    core = await startTestApp();
    edge = await edgeOnly(core.coreUrl ?? "", { SLUICE_PUBLIC_URL: "https://llm.example.com/" });
    const { apiKey, accountId } = await core.newAccount();
    expect(edge.publicUrl).toBe("https://llm.example.com");
    expect((await webClients(edge.edgeUrl, apiKey).identity.getCaller({})).id).toBe(accountId);
    expect((await fetch(`${edge.edgeUrl}/console/usage`)).status).toBe(200);
    const docs = await (await fetch(`${edge.edgeUrl}/docs/errors/spend_cap_exceeded`)).text();
    expect(docs).toContain("https://llm.example.com/console/billing");
  });

  it("answers Unavailable (service_unavailable) when its core cannot be reached", async () => {
    const lonely = await edgeOnly(`http://127.0.0.1:${await freePort()}`);
    try {
      const { code, reason } = await failure(webClients(lonely.edgeUrl, "svc_sk_x").identity.getCaller({}));
      expect({ code, reason }).toEqual({ code: Code.Unavailable, reason: "service_unavailable" });
    } finally {
      await lonely.close();
    }
  });
});

describe("SLUICE_PUBLIC_ADMIN=off", () => {
  let app: TestApp;
  afterAll(async () => {
    await app?.close();
  });

  it("keeps Admin off the public port, and on the core port", async () => {
    app = await startTestApp({ SLUICE_PUBLIC_ADMIN: "off" });
    const { apiKey, accountId } = await app.newAccount();
    const { code } = await failure(webClients(app.edgeUrl, ADMIN_TOKEN).admin.searchAccounts({ query: accountId }));
    expect(code).toBe(Code.Unimplemented);
    expect((await webClients(app.edgeUrl, apiKey).identity.getCaller({})).id).toBe(accountId);
    const found = await app.admin.searchAccounts({ query: accountId }, { headers: app.adminHeaders });
    expect(found.accounts.map((a) => a.id)).toEqual([accountId]);
  });
});
