import { Redis } from "ioredis";
import { startRedisServer, type RedisServer } from "./redis-server.ts";

/** A three-primary Redis Cluster of spawned servers, for checking that every script is slot-safe. */
export interface RedisCluster {
  /** `redis-cluster://` URL seeding from every node. */
  url: string;
  close(): Promise<void>;
}

/** Spawns three cluster-enabled servers, splits the 16,384 slots between them and waits for `cluster_state:ok`. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const servers: RedisServer[] = await Promise.all([0, 1, 2].map(() => startRedisServer({ cluster: true })));
  const clients = servers.map((s) => new Redis(s.port, "127.0.0.1", { lazyConnect: false, maxRetriesPerRequest: 1 }));
  try {
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    await Promise.all(
      clients.map((c, i) => c.call("CLUSTER", "ADDSLOTSRANGE", ranges[i]?.[0] ?? 0, ranges[i]?.[1] ?? 0)),
    );
    const first = clients[0];
    if (!first) throw new Error("no node");
    for (const s of servers.slice(1)) await first.call("CLUSTER", "MEET", "127.0.0.1", s.port);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const states = await Promise.all(clients.map(async (c) => String(await c.call("CLUSTER", "INFO"))));
      if (states.every((s) => s.includes("cluster_state:ok"))) break;
      if (Date.now() > deadline) throw new Error(`cluster did not converge:\n${states.join("\n")}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    for (const c of clients) c.disconnect();
  }
  return {
    url: `redis-cluster://${servers.map((s) => `127.0.0.1:${s.port}`).join(",")}`,
    async close() {
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}
