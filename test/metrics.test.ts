import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, TEST_STORE, type TestApp } from "./support/harness.ts";

/** Prometheus metrics live on their own port, never on the public one. */
describe("/metrics", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("counts edge requests and core RPCs, on the metrics port only", async () => {
    const { apiKey } = await app.newAccount();
    const res = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(res.status).toBe(200);
    const text = await (await fetch(`${app.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/^sluice_http_requests_total\{route="\/v1\/me",method="GET",status="200"\} [1-9]\d*$/m);
    expect(text).toMatch(
      /^sluice_rpcs_total\{rpc="sluice\.identity\.v1\.IdentityService\/GetCaller",code="OK"\} [1-9]\d*$/m,
    );
    const commands = Number(/^sluice_redis_commands_total (\d+)$/m.exec(text)?.[1]);
    if (TEST_STORE === "redis") expect(commands).toBeGreaterThan(0);
    else expect(commands).toBe(0);
    expect((await fetch(`${app.edgeUrl}/metrics`)).status).toBe(404);
  });
});
