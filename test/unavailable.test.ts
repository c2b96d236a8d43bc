import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.ts";
import { sluiceError } from "../src/errors/catalogue.ts";
import { expectRetryAfter, expectRetryHeaders, expectStructured } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { registryWith, scriptedEngine } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat } from "./support/http.ts";

/**
 * SPEC's 503 row: "Service temporarily unavailable; Retry-After is present". A model whose
 * upstream is unavailable before the first token answers 503 with the structured envelope
 * (DESIGN: type `service_unavailable`), unbilled; `/readyz` reports an engine that is not ready.
 */
describe("503 for an engine that is unavailable before the first delta", () => {
  let app: TestApp;
  const down = scriptedEngine({
    failAfter: { deltas: 0, error: () => new ConnectError("upstream refused the connection", Code.Unavailable) },
  });
  const downCatalogued = scriptedEngine({
    failAfter: { deltas: 0, error: () => sluiceError("service_unavailable", { retryAfterMs: 3000 }) },
  });

  beforeAll(async () => {
    app = await startTestApp(
      {},
      {
        models: registryWith([
          { name: "down", engine: down },
          { name: "down-catalogued", engine: downCatalogued },
        ]),
      },
    );
  });

  afterAll(async () => {
    await app?.close();
  });

  it.each([false, true])(
    "a ConnectError Unavailable from the engine gives 503 + Retry-After (stream: %s)",
    async (stream) => {
      const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
      const reply = await postChat(app, apiKey, { model: "down", messages: CHAT_MESSAGES, stream });
      expectStructured(reply, 503, "service_unavailable", "service_unavailable");
      expectRetryAfter(reply);
      expect(reply.text).not.toContain("upstream refused");
      const balance = await balanceOf(app, accountId);
      expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
      expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
    },
  );

  it("a catalogued service_unavailable keeps its retry delay as Retry-After and retry-after-ms", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const reply = await postChat(app, apiKey, { model: "down-catalogued", messages: CHAT_MESSAGES });
    expectStructured(reply, 503, "service_unavailable", "service_unavailable");
    expect(expectRetryHeaders(reply)).toEqual({ seconds: 3, ms: 3000 });
    expect((await balanceOf(app, accountId)).spent).toBe(0n);
  });

  it("the service stays ready: one failing call does not change /readyz", async () => {
    const res = await fetch(`${app.edgeUrl}/readyz`);
    expect(res.status).toBe(200);
  });
});

describe("/readyz when an engine is not ready", () => {
  let app: TestApp;

  beforeAll(async () => {
    const broken = scriptedEngine({ notReady: new Error("weights not loaded") });
    app = await startTestApp({}, { models: registryWith([{ name: "broken", engine: broken }]) });
  });

  afterAll(async () => {
    await app?.close();
  });

  it("answers 503 with Retry-After while /healthz stays 200", async () => {
    const ready = await fetch(`${app.edgeUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(Number(ready.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(ready.headers.get("retry-after-ms")).toBe("1000");
    const healthz = await fetch(`${app.edgeUrl}/healthz`);
    expect(healthz.status).toBe(200);
  });

  it("the gRPC health service on the core says NOT_SERVING", async () => {
    if (!app.coreUrl) throw new Error("no core");
    const health = createClient(Health, createGrpcTransport({ baseUrl: app.coreUrl }));
    const out = await health.check({});
    expect(out.status).toBe(HealthCheckResponse_ServingStatus.NOT_SERVING);
  });
});
