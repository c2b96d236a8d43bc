import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PaymentStatus } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";

/**
 * Two processes' worth of Sluice on one Redis: a change made through one must reach the
 * other's in-process cache within 1 s (DESIGN: "at most 1 s later, if they are cached").
 */
describe("shared Redis: changes reach every process within 1 s", () => {
  let redis: RedisServer;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    redis = await startRedisServer();
    a = await startTestApp({ REDIS_URL: redis.url });
    b = await startTestApp({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await redis?.close();
  });

  /** Milliseconds until `probe` on app B answers `status`, polling every 20 ms, or Infinity after 3 s. */
  async function msUntil(status: number, probe: () => Promise<Response>): Promise<number> {
    const started = performance.now();
    while (performance.now() - started < 3000) {
      const res = await probe();
      await res.arrayBuffer();
      if (res.status === status) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 20));
    }
    return Number.POSITIVE_INFINITY;
  }

  it("a key revoked through one process is refused by another within 1 s", async () => {
    const { apiKey, apiKeyId } = await a.newAccount({ rps: 1000, burst: 1000 });
    const me = () => fetch(`${b.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect((await me()).status).toBe(200); // now cached in B
    await a.admin.revokeApiKey({ apiKeyId }, { headers: a.adminHeaders });
    const elapsed = await msUntil(401, me);
    expect(elapsed).toBeLessThan(1000);
  });

  it("an account status changed through one process applies in another within 1 s", async () => {
    const { apiKey, accountId } = await a.newAccount({ rps: 1000, burst: 1000 });
    const chat = () =>
      fetch(`${b.edgeUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Status changes. Do they show?" }] }),
      });
    expect((await chat()).status).toBe(200); // the account is now cached in B
    await a.admin.updateAccount({ accountId, paymentStatus: PaymentStatus.FAILED }, { headers: a.adminHeaders });
    const elapsed = await msUntil(402, chat);
    expect(elapsed).toBeLessThan(1000);
    const refused = await chat();
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("payment_failed");
  });

  it("spend and usage records written by one process are read by the other", async () => {
    const { apiKey, accountId } = await a.newAccount({ rps: 1000, burst: 1000 });
    const res = await fetch(`${a.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Shared spend. Shared records." }] }),
    });
    const body = (await res.json()) as { id: string; usage: { prompt_tokens: number; completion_tokens: number } };
    const { account } = await b.admin.getAccount({ accountId }, { headers: b.adminHeaders });
    expect(Number(account?.spentUsdMicros)).toBe(body.usage.prompt_tokens + 2 * body.usage.completion_tokens);
    const { usageRecords } = await b.admin.listUsageRecords({ accountId }, { headers: b.adminHeaders });
    expect(usageRecords.map((r) => r.id)).toEqual([body.id]);
  });
});
