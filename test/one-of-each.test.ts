import { afterAll, describe, expect, it } from "vitest";
import { createMemoryStore } from "../src/store/memory/index.ts";
import type { Store } from "../src/store/store.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES, postChat } from "./support/http.ts";
import { startRedisServer, type RedisServer } from "./support/redis-server.ts";

/**
 * Issue 8, "one of each per call": a chat call through the edge costs one key lookup, one
 * rate-limit charge (which takes the hold) and one settle, and on Redis two round trips in all
 * once the key is cached.
 * Store-specific on purpose (it counts a memory store's calls and a Redis of its own).
 */

type Counted = "findApiKeyByHash" | "chargeRateLimit" | "settle" | "release" | "extendReservation" | "getAccount";

/** A memory store that counts the calls of the methods a chat call may make. */
function countingStore(): { store: Store; counts: Record<Counted, number> } {
  const inner = createMemoryStore();
  const counts: Record<Counted, number> = {
    findApiKeyByHash: 0,
    chargeRateLimit: 0,
    settle: 0,
    release: 0,
    extendReservation: 0,
    getAccount: 0,
  };
  const store: Store = {
    ...inner,
    findApiKeyByHash: (hash) => {
      counts.findApiKeyByHash++;
      return inner.findApiKeyByHash(hash);
    },
    chargeRateLimit: (request) => {
      counts.chargeRateLimit++;
      return inner.chargeRateLimit(request);
    },
    settle: (request) => {
      counts.settle++;
      return inner.settle(request);
    },
    release: (reservation) => {
      counts.release++;
      return inner.release(reservation);
    },
    extendReservation: (request) => {
      counts.extendReservation++;
      return inner.extendReservation(request);
    },
    getAccount: (id) => {
      counts.getAccount++;
      return inner.getAccount(id);
    },
  };
  return { store, counts };
}

async function redisCommands(app: TestApp): Promise<number> {
  const text = await (await fetch(`${app.metricsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("sluice_redis_commands_total"));
  return Number(line?.split(" ").at(-1));
}

const apps: TestApp[] = [];
let redis: RedisServer | undefined;
afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  await redis?.close();
});

describe("one of each per chat call", () => {
  it.each([false, true])("one key lookup, one rate-limit charge, one settle (stream: %s)", async (stream) => {
    const { store, counts } = countingStore();
    const app = await startTestApp({ REDIS_URL: "" }, { store });
    apps.push(app);
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    for (const k of Object.keys(counts) as Counted[]) counts[k] = 0;
    const reply = await postChat(app, apiKey, { messages: CHAT_MESSAGES, stream });
    expect(reply.status).toBe(200);
    expect(counts).toEqual({
      findApiKeyByHash: 1,
      chargeRateLimit: 1,
      settle: 1,
      release: 0,
      extendReservation: 0,
      getAccount: 1,
    });
  });

  it.each([false, true])("two Redis round trips once the key and account are cached (stream: %s)", async (stream) => {
    redis ??= await startRedisServer();
    // The webhook dispatcher's poll of the queue (its first pass ends at start) must not land in the count.
    const app = await startTestApp({ REDIS_URL: redis.url, SLUICE_WEBHOOK_POLL_MS: "3600000" });
    apps.push(app);
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    expect((await postChat(app, apiKey, { messages: CHAT_MESSAGES, stream })).status).toBe(200);
    const before = await redisCommands(app);
    expect((await postChat(app, apiKey, { messages: CHAT_MESSAGES, stream })).status).toBe(200);
    expect((await redisCommands(app)) - before).toBe(2);
  });
});
