/**
 * Throughput and latency of the whole service over loopback: a Sluice child process (memory
 * store, built-in engine) and a load generator in this process, with N concurrent keep-alive
 * connections for a fixed time per scenario. Run: `npm run bench` (or `node bench/http.bench.ts`).
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

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ADMIN = "bench-admin-token-0123456789";
const ports = { PORT: "18480", GRPC_PORT: "18451", METRICS_PORT: "18464" };

const child = spawn(process.execPath, ["src/main.ts"], {
  env: { ...process.env, ...ports, HOST: "127.0.0.1", SLUICE_ADMIN_TOKEN: ADMIN, SLUICE_LOG: "warn", SLUICE_DEV_BOOTSTRAP: "off" },
  stdio: ["ignore", "pipe", "inherit"],
});
const [first] = (await once(child.stdout, "data")) as [Buffer];
if (!first.toString().includes("Sluice edge")) throw new Error(`unexpected start-up output: ${first}`);
const edge = `http://127.0.0.1:${ports.PORT}`;
const core = `http://127.0.0.1:${ports.GRPC_PORT}`;
const transport = createGrpcTransport({ baseUrl: core });
const admin = createClient(AdminService, transport);
const headers = { authorization: `Bearer ${ADMIN}` };
const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: 1_000_000_000_000n }, { headers });
const { secret } = await admin.createApiKey({ accountId: account?.id ?? "", rateLimitRps: 1_000_000, burst: 1_000_000 }, { headers });
const auth = { authorization: `Bearer ${secret}` };

const chatBody = (stream: boolean) => JSON.stringify({
  stream,
  max_tokens: 32,
  messages: [
    { role: "system", content: "Sluice is a gateway. It meters spend with monthly caps. Keys are rate limited per second." },
    { role: "user", content: "How is spend metered?" },
  ],
});

async function measure(name: string, call: () => Promise<void>): Promise<{ name: string; rps: number; p50: number; p99: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      try {
        await call();
        latencies.push(performance.now() - t);
      } catch {
        errors += 1;
      }
    }
  }));
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
  return { name, rps: latencies.length / SECONDS, p50: q(0.5), p99: q(0.99), errors };
}

const ok = async (res: Response) => {
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(String(res.status));
};
const identity = createClient(IdentityService, transport);
const results = [
  await measure("gRPC GetCaller (core direct)", async () => { await identity.getCaller({}, { headers: auth }); }),
  await measure("HTTP GET /v1/me (edge -> core)", async () => ok(await fetch(`${edge}/v1/me`, { headers: auth }))),
  await measure("HTTP chat, JSON", async () => ok(await fetch(`${edge}/v1/chat/completions`, { method: "POST", headers: auth, body: chatBody(false) }))),
  await measure("HTTP chat, SSE", async () => ok(await fetch(`${edge}/v1/chat/completions`, { method: "POST", headers: auth, body: chatBody(true) }))),
];

console.log(`\nSluice over loopback: ${CONCURRENCY} concurrent clients, ${SECONDS} s per scenario, memory store\n`);
console.log("| scenario | req/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|");
for (const r of results) console.log(`| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} |`);
child.kill("SIGTERM");
await once(child, "exit");
