import { afterAll } from "vitest";
import type { RedisClient } from "../../src/store/redis/client.ts";
import type { RedisStore } from "../../src/store/redis/index.ts";
import { type RedisCluster, startRedisCluster } from "./redis-cluster.ts";
import { type RedisServer, startRedisServer } from "./redis-server.ts";

/**
 * The Redis deployments a Redis-only suite runs on: one redis-server and one Cluster, each
 * started on first use, with the clients and stores the suite opens on them. Everything is
 * closed after the suite's tests (stores first, then clients, then the servers).
 */
export function redisBackends(): {
  /** `[name, url]` pairs for `describe.each`. */
  backends: [string, () => Promise<string>][];
  clients: RedisClient[];
  stores: RedisStore[];
} {
  let server: Promise<RedisServer> | undefined;
  let cluster: Promise<RedisCluster> | undefined;
  const clients: RedisClient[] = [];
  const stores: RedisStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    for (const c of clients) c.disconnect();
    await (await server)?.close();
    await (await cluster)?.close();
  });
  const backends: [string, () => Promise<string>][] = [
    [
      "redis",
      async () => {
        server ??= startRedisServer();
        return (await server).url;
      },
    ],
    [
      "redis-cluster",
      async () => {
        cluster ??= startRedisCluster();
        return (await cluster).url;
      },
    ],
  ];
  return { backends, clients, stores };
}
