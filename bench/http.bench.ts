/**
 * Throughput and latency of the whole service over loopback, on the memory store and on the
 * Redis store in one run: a Sluice child process per store and a load generator in this
 * process, with N concurrent keep-alive clients for a fixed time per scenario. On Redis it
 * also reports the Redis commands (round trips) per call, from `sluice_redis_commands_total`.
 * Run: `npm run bench` (or `node bench/http.bench.ts`).
 *
 * The figures are for comparing scenarios measured side by side in one run: this machine is
 * shared and noisy, so absolute numbers move between runs.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { IdentityService } from "../gen/sluice/identity/v1/identity_service_pb.ts";
import { expectOk, measure } from "./load.ts";
import { freePort, startRedisServer } from "../test/support/redis-server.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ADMIN = "bench-admin-token-0123456789";

interface Result {
  store: string;
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  redisCommandsPerCall?: number;
}

const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);

const chatBody = (stream: boolean) =>
  JSON.stringify({
    stream,
    max_tokens: 32,
    messages: [
      {
        role: "system",
        content: "Sluice is a gateway. It meters spend with monthly caps. Keys are rate limited per second.",
      },
      { role: "user", content: "How is spend metered?" },
    ],
  });

async function bench(store: string, redisUrl?: string): Promise<Result[]> {
  const ports = {
    PORT: String(await freePort()),
    GRPC_PORT: String(await freePort()),
    METRICS_PORT: String(await freePort()),
  };
  const child = spawn(process.execPath, ["src/main.ts"], {
    env: {
      ...process.env,
      ...ports,
      HOST: "127.0.0.1",
      SLUICE_ADMIN_TOKEN: ADMIN,
      SLUICE_LOG: "warn",
      SLUICE_DEV_BOOTSTRAP: "off",
      ...(redisUrl && { REDIS_URL: redisUrl }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const [first] = (await once(child.stdout, "data")) as [Buffer];
    if (!first.toString().includes("Sluice edge")) throw new Error(`unexpected start-up output: ${first}`);
    const edge = `http://127.0.0.1:${ports.PORT}`;
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${ports.GRPC_PORT}` });
    const admin = createClient(AdminService, transport);
    const headers = { authorization: `Bearer ${ADMIN}` };
    const { account } = await admin.createAccount(
      { onboardingComplete: true, spendCapUsdMicros: 1_000_000_000_000n },
      { headers },
    );
    const { secret } = await admin.createApiKey(
      { accountId: account?.id ?? "", rateLimitRps: 1_000_000, burst: 1_000_000 },
      { headers },
    );
    const auth = { authorization: `Bearer ${secret}` };
    const identity = createClient(IdentityService, transport);
    const commands = async () => {
      const text = await (await fetch(`http://127.0.0.1:${ports.METRICS_PORT}/metrics`)).text();
      return Number(/^sluice_redis_commands_total (\d+)$/m.exec(text)?.[1] ?? NaN);
    };

    const scenarios: Array<[string, () => Promise<void>]> = [
      [
        "gRPC GetCaller (core direct)",
        async () => {
          await identity.getCaller({}, { headers: auth });
        },
      ],
      ["HTTP GET /v1/me (edge -> core)", async () => expectOk(await fetch(`${edge}/v1/me`, { headers: auth }))],
      [
        "HTTP chat, JSON",
        async () =>
          expectOk(
            await fetch(`${edge}/v1/chat/completions`, { method: "POST", headers: auth, body: chatBody(false) }),
          ),
      ],
      [
        "HTTP chat, SSE",
        async () =>
          expectOk(await fetch(`${edge}/v1/chat/completions`, { method: "POST", headers: auth, body: chatBody(true) })),
      ],
    ];
    const results: Result[] = [];
    for (const [name, call] of scenarios) {
      // Unmeasured warm-up, so both stores are compared with a warm JIT on both sides.
      await measure(call, WARMUP_SECONDS, CONCURRENCY);
      const before = await commands();
      const r = await measure(call, SECONDS, CONCURRENCY);
      const perCall = redisUrl ? ((await commands()) - before) / r.calls : undefined;
      results.push({ store, name, ...r, ...(perCall !== undefined && { redisCommandsPerCall: perCall }) });
    }
    return results;
  } finally {
    child.kill("SIGTERM");
    await once(child, "exit");
  }
}

const redisServer = await startRedisServer();
try {
  const results = [...(await bench("memory")), ...(await bench("redis", redisServer.url))];
  console.log(`\nSluice over loopback: ${CONCURRENCY} concurrent clients, ${SECONDS} s per scenario, one run\n`);
  console.log(
    "| store | scenario | req/s | p50 ms | p99 ms | errors | Redis commands per call |\n|---|---|---|---|---|---|---|",
  );
  for (const r of results) {
    console.log(
      `| ${r.store} | ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} | ` +
        `${r.redisCommandsPerCall?.toFixed(2) ?? "-"} |`,
    );
  }
  const pair = (name: string) => {
    const m = results.find((r) => r.store === "memory" && r.name === name);
    const x = results.find((r) => r.store === "redis" && r.name === name);
    return m && x ? (x.rps / m.rps).toFixed(2) : "n/a";
  };
  console.log(
    `\nRedis / memory req/s: chat JSON ${pair("HTTP chat, JSON")}, chat SSE ${pair("HTTP chat, SSE")}, ` +
      `/v1/me ${pair("HTTP GET /v1/me (edge -> core)")}`,
  );
} finally {
  await redisServer.close();
}
