import { execFileSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, startRedisServer, type RedisServer } from "./support/redis-server.ts";
import { adminOf, spawnSluice, type SluiceProcess } from "./support/sluice-process.ts";

/**
 * Issue 8, "all cores": `SLUICE_WORKERS=N` runs N worker processes sharing the ports with the
 * Redis store, and one process, saying so, with the memory store. Store-specific on purpose.
 */

const ADMIN = "workers-admin-token-0123456789";
const BASE = {
  PORT: "0",
  GRPC_PORT: "0",
  METRICS_PORT: "0",
  HOST: "127.0.0.1",
  SLUICE_ADMIN_TOKEN: ADMIN,
  SLUICE_LOG: "warn",
  SLUICE_DEV_BOOTSTRAP: "off",
};

/** The pids of a process's children. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
}

let redis: RedisServer | undefined;
const procs: SluiceProcess[] = [];
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await redis?.close();
});

describe("SLUICE_WORKERS", () => {
  it("runs two workers on Redis: both answer, the primary sums their metrics, SIGTERM stops them all", async () => {
    redis = await startRedisServer();
    const metricsPort = await freePort();
    const sluice = await spawnSluice({
      ...BASE,
      REDIS_URL: redis.url,
      SLUICE_WORKERS: "2",
      METRICS_PORT: String(metricsPort),
    });
    procs.push(sluice);
    const pid = sluice.child.pid ?? 0;
    const workers = childrenOf(pid);
    expect(workers).toHaveLength(2);
    const admin = adminOf(sluice.coreUrl, ADMIN);
    const { apiKey } = await admin.newAccount(10_000_000n, 1000, 1000);
    // Fresh connections are spread over the workers; every one of them answers.
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${sluice.edgeUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", connection: "close" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Workers share one Redis. Do they?" }] }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // The cluster hands connections to the workers in turn; the primary asks both for their
    // metrics at each scrape, so every scrape counts all eight calls.
    const chats = new RegExp(
      String.raw`^sluice_http_request_duration_seconds_count\{route="/v1/chat/completions",method="POST",` +
        String.raw`status="200",code=""\} (\d+)$`,
      "m",
    );
    for (let i = 0; i < 3; i++) {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(Number(chats.exec(text)?.[1])).toBe(8);
      expect(text).toMatch(/^sluice_reservations_total\{outcome="settled"\} 8$/m);
    }
    const exited = new Promise<number | null>((resolve) => sluice.child.once("exit", (code) => resolve(code)));
    sluice.child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(workers.filter((w) => childrenOf(pid).includes(w))).toEqual([]);
  });

  it("runs one process with the memory store, and says why", async () => {
    const sluice = await spawnSluice({ ...BASE, SLUICE_WORKERS: "2" });
    procs.push(sluice);
    expect(childrenOf(sluice.child.pid ?? 0)).toEqual([]);
    expect(sluice.stderr()).toMatch(/memory store cannot be shared by workers/);
    expect((await fetch(`${sluice.edgeUrl}/healthz`)).status).toBe(200);
  });
});
