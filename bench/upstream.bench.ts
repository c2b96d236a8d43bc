/**
 * What the `openai` engine adds: the same load sent straight to an OpenAI-compatible upstream
 * and through Sluice to it, side by side in one run. The upstream (the test suite's fake
 * server), Sluice and the load generator each run in their own process.
 * Run: `npm run bench` (or `node bench/upstream.bench.ts`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import { expectOk, measure, type LoadResult } from "./load.ts";
import { freePort } from "../test/support/redis-server.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ADMIN = "bench-admin-token-0123456789";

async function firstLine(child: ChildProcess): Promise<string> {
  const [data] = (await once(child.stdout ?? child, "data")) as [Buffer];
  return data.toString().split("\n")[0] ?? "";
}

/** Per-token delay of the paced upstream: roughly a small model on a busy GPU. */
const PACED_MS = Number(process.env.BENCH_TOKEN_DELAY_MS ?? 10);
const startUpstream = async (delayMs: number) => {
  const child = spawn(process.execPath, ["bench/fake-upstream-main.ts"], {
    env: { ...process.env, PORT: String(await freePort()), CHUNK_DELAY_MS: String(delayMs) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  return { child, url: await firstLine(child) };
};
const upstreams = { instant: await startUpstream(0), paced: await startUpstream(PACED_MS) };
const modelsFile = join(tmpdir(), `sluice-bench-models-${process.pid}.json`);
const price = {
  upstreamModel: "meta-llama/Llama-3.1-8B-Instruct",
  inputUsdMicrosPerMillion: 200000,
  outputUsdMicrosPerMillion: 600000,
};
writeFileSync(
  modelsFile,
  JSON.stringify({
    models: [
      { name: "instant", engine: "openai", baseUrl: upstreams.instant.url, ...price },
      { name: "paced", engine: "openai", baseUrl: upstreams.paced.url, ...price },
    ],
  }),
);
const ports = {
  PORT: String(await freePort()),
  GRPC_PORT: String(await freePort()),
  METRICS_PORT: String(await freePort()),
};
const sluice = spawn(process.execPath, ["src/main.ts"], {
  env: {
    ...process.env,
    ...ports,
    HOST: "127.0.0.1",
    SLUICE_ADMIN_TOKEN: ADMIN,
    SLUICE_LOG: "warn",
    SLUICE_DEV_BOOTSTRAP: "off",
    SLUICE_MODELS: modelsFile,
  },
  stdio: ["ignore", "pipe", "inherit"],
});
try {
  await firstLine(sluice);
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${ports.GRPC_PORT}` }));
  const headers = { authorization: `Bearer ${ADMIN}` };
  const { account } = await admin.createAccount(
    { onboardingComplete: true, spendCapUsdMicros: 1_000_000_000_000n },
    { headers },
  );
  const { secret } = await admin.createApiKey(
    { accountId: account?.id ?? "", rateLimitRps: 1_000_000, burst: 1_000_000 },
    { headers },
  );

  const body = (model: string, stream: boolean) =>
    JSON.stringify({
      model,
      stream,
      max_tokens: 32,
      messages: [
        { role: "user", content: "Tell me about gateways that meter spend and keep their promises under load." },
      ],
    });
  const post = (base: string, auth: string, payload: string) => async () =>
    expectOk(
      await fetch(`${base}/chat/completions`, {
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json" },
        body: payload,
      }),
    );
  const direct = (url: string, stream: boolean) =>
    post(url, "Bearer x", body("meta-llama/Llama-3.1-8B-Instruct", stream));
  const through = (model: string, stream: boolean) =>
    post(`http://127.0.0.1:${ports.PORT}/v1`, `Bearer ${secret}`, body(model, stream));

  const rows: Array<[string, string, string, LoadResult]> = [];
  for (const [upstream, { url }] of Object.entries(upstreams)) {
    // The fake upstream paces only streamed answers, so the paced one is compared on SSE alone.
    for (const stream of upstream === "paced" ? [true] : [false, true]) {
      const kind = stream ? "SSE" : "JSON";
      for (const [path, call] of [
        ["direct", direct(url, stream)],
        ["through Sluice", through(upstream, stream)],
      ] as const) {
        await measure(call, 1, CONCURRENCY); // warm-up
        rows.push([upstream, kind, path, await measure(call, SECONDS, CONCURRENCY)]);
      }
    }
  }
  console.log(`\nUpstream engine overhead: ${CONCURRENCY} concurrent clients, ${SECONDS} s per scenario, one run;`);
  console.log(`"instant" answers at once, "paced" waits ${PACED_MS} ms per token (about 15 tokens per answer)\n`);
  console.log("| upstream | response | path | req/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|---|");
  for (const [upstream, kind, path, r] of rows)
    console.log(
      `| ${upstream} | ${kind} | ${path} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} ` +
        `| ${r.errors} |`,
    );
  for (const upstream of Object.keys(upstreams)) {
    for (const kind of ["JSON", "SSE"]) {
      const d = rows.find((r) => r[0] === upstream && r[1] === kind && r[2] === "direct")?.[3];
      const t = rows.find((r) => r[0] === upstream && r[1] === kind && r[2] === "through Sluice")?.[3];
      if (d && t)
        console.log(
          `${upstream} ${kind}: through/direct req/s ${(t.rps / d.rps).toFixed(2)}, ` +
            `p50 latency added ${(t.p50 - d.p50).toFixed(2)} ms`,
        );
    }
  }
} finally {
  sluice.kill("SIGTERM");
  for (const { child } of Object.values(upstreams)) {
    child.stdin?.end();
    child.kill("SIGTERM");
  }
}
