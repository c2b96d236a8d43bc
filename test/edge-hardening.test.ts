import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./support/harness.ts";

describe("edge hardening", () => {
  let app: TestApp;
  let apiKey: string;
  beforeAll(async () => {
    app = await startTestApp();
    ({ apiKey } = await app.newAccount({ rps: 1000, burst: 1000 }));
  });
  afterAll(async () => {
    await app?.close();
  });

  const chat = (body: string) =>
    fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "x-request-id": "hard-1" },
      body,
    });

  it("sends single-valued headers on a streaming call refused before its first chunk", async () => {
    const res = await chat(
      JSON.stringify({ model: "nope", stream: true, messages: [{ role: "user", content: "hi" }] }),
    );
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: "model_not_found" });
    expect(res.headers.get("x-request-id")).toBe("hard-1");
    expect(res.headers.get("x-ratelimit-remaining-requests")).toMatch(/^\d+$/);
    expect(res.headers.get("x-ratelimit-limit-requests")).toBe("1000");
  });

  it("refuses JSON nested deeper than 64 levels with a 400, not a crash", async () => {
    const deep = `${"[".repeat(5_000)}${"]".repeat(5_000)}`;
    const res = await chat(`{"messages":[{"role":"user","content":"hi"}],"tools":[{"x":${deep}}]}`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ detail: "invalid_request_body" });
    expect((await fetch(`${app.edgeUrl}/healthz`)).status).toBe(200);
  });

  it("labels metrics by route, not by the raw path", async () => {
    for (const path of ["/v1/me/", "/v1/me//", "/v1/me///"]) {
      await (await fetch(`${app.edgeUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` } })).arrayBuffer();
    }
    const text = await (await fetch(`${app.metricsUrl}/metrics`)).text();
    expect(text).not.toMatch(/route="\/v1\/me\/+"/);
    expect(text).toMatch(
      /^sluice_http_request_duration_seconds_count\{route="\/v1\/me",method="GET",status="200",code=""\} 3$/m,
    );
  });
});
