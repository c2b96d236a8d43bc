import { describe, expect, it } from "vitest";
import { periodOf } from "../src/services/completion/pricing.ts";
import { connectRedis } from "../src/store/redis/client.ts";
import { createRedisStore } from "../src/store/redis/index.ts";
import type { Balance } from "../src/store/store.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { SLOW_MODEL, slowModels } from "./support/slow-model.ts";
import { readStream } from "./support/stream-reader.ts";

const streamSlow = (edgeUrl: string, apiKey: string) =>
  fetch(`${edgeUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: SLOW_MODEL, stream: true, messages: [{ role: "user", content: "Take your time." }] }),
  });

/** An account's money read after its app closed: from the memory store itself, or from Redis. */
async function balanceAfterClose(app: TestApp, accountId: string): Promise<Balance> {
  const now = Date.now();
  if (app.redisUrl === undefined) {
    if (!app.store) throw new Error("no store");
    return app.store.balance({ accountId, period: periodOf(now), nowMs: now });
  }
  const store = createRedisStore({ redis: await connectRedis(app.redisUrl) });
  try {
    return await store.balance({ accountId, period: periodOf(now), nowMs: now });
  } finally {
    await store.close();
  }
}

describe("shutdown", () => {
  it("lets a stream in flight finish within the grace period, and refuses new connections", async () => {
    const app = await startTestApp({ SLUICE_SHUTDOWN_GRACE_MS: "10000" }, { models: slowModels() });
    const { apiKey } = await app.newAccount({ rps: 100, burst: 100 });
    const res = await streamSlow(app.edgeUrl, apiKey);
    expect(res.status).toBe(200);
    const reader = readStream(res.body ?? new ReadableStream());
    await reader.until((t) => t.includes("w1"), 5000);
    const started = performance.now();
    const closing = app.close();
    await expect(fetch(`${app.edgeUrl}/healthz`)).rejects.toThrow();
    const end = await reader.end;
    await closing;
    expect(end.error).toBeUndefined();
    expect(end.text).toContain('"usage"');
    expect(end.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it("cuts what is still running when the grace period ends", async () => {
    const app = await startTestApp({ SLUICE_SHUTDOWN_GRACE_MS: "300" }, { models: slowModels() });
    const { apiKey } = await app.newAccount({ rps: 100, burst: 100 });
    const res = await streamSlow(app.edgeUrl, apiKey);
    const reader = readStream(res.body ?? new ReadableStream());
    await reader.until((t) => t.includes("w1"), 5000);
    const started = performance.now();
    await app.close();
    const elapsed = performance.now() - started;
    const end = await reader.end;
    expect(end.text).not.toContain("[DONE]");
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1500);
  });

  it("releases a cut call's hold before it closes the store: nothing held, nothing charged", async () => {
    const app = await startTestApp({ SLUICE_SHUTDOWN_GRACE_MS: "0" }, { models: slowModels() });
    const { apiKey, accountId } = await app.newAccount({ rps: 100, burst: 100 });
    const res = await streamSlow(app.edgeUrl, apiKey);
    const reader = readStream(res.body ?? new ReadableStream());
    await reader.until((t) => t.includes("w1"), 5000);
    await app.close();
    await reader.end;
    expect(await balanceAfterClose(app, accountId)).toEqual({ spentUsdMicros: 0, reservedUsdMicros: 0 });
  });
});
