import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "./support/fake-upstream.ts";
import { TEST_STORE } from "./support/harness.ts";
import { usageRecordsOf } from "./support/ledger.ts";
import { startUpstreamApp, type UpstreamApp } from "./support/upstream-app.ts";

/** The value of the sample `name{labels}` in exposition text (labels in prom-client's order), or NaN. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const set = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const line = text.split("\n").find((l) => l.startsWith(set ? `${name}{${set}}` : `${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** The sum of every sample of `name` whose labels include `match`. */
function total(text: string, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(match).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/**
 * `/metrics` after a short mixed load: JSON and SSE chat calls on the built-in engine and on
 * an upstream (one of whose two servers is down), a rate-limited call, a refusal at the spend
 * cap and a bad key. Every family issue 9 lists is there, with buckets, and the token and
 * spend counters agree with the usage records.
 */
describe("/metrics after a mixed load", () => {
  let app: UpstreamApp;
  let upstream: FakeUpstream;
  let text = "";
  let accountId = "";

  beforeAll(async () => {
    upstream = await startFakeUpstream({ chunkDelayMs: 5 });
    // The first base URL refuses connections: the first call fails over from it, and its
    // breaker (one failure) opens, so later calls go straight to the live one.
    const dead = await startFakeUpstream();
    await dead.stop();
    app = await startUpstreamApp([
      { name: "llama", baseUrl: [dead.url, upstream.url], breakerFailures: 1, breakerOpenMs: 60_000 },
    ]);
    const account = await app.newAccount({ rps: 100, burst: 100 });
    accountId = account.accountId;
    const call = (model: string, stream: boolean, key = account.apiKey) =>
      fetch(`${app.edgeUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model,
          stream,
          max_tokens: 16,
          messages: [{ role: "user", content: "Sluice meters every call. What does it meter?" }],
        }),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    for (const model of ["service-extract", "llama"])
      for (const stream of [false, true]) expect((await call(model, stream)).status).toBe(200);
    expect((await call("llama", false)).status).toBe(200);

    const limited = await app.newAccount({ rps: 1, burst: 1 });
    expect((await call("service-extract", false, limited.apiKey)).status).toBe(200);
    expect((await call("service-extract", false, limited.apiKey)).status).toBe(429);
    const broke = await app.newAccount({ capUsdMicros: 0n });
    expect((await call("service-extract", false, broke.apiKey)).status).toBe(402);
    expect((await call("service-extract", false, "sk-not-a-real-key")).status).toBe(401);

    text = await (await fetch(`${app.metricsUrl}/metrics`)).text();
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.stop();
  });

  it("serves histograms with buckets for requests, RPCs, GenAI durations, time to first token and upstreams", () => {
    const chat = { route: "/v1/chat/completions", method: "POST", status: "200", code: "" };
    // Five calls of the first account and one of the rate-limited one's.
    expect(total(text, "sluice_http_request_duration_seconds_count", chat)).toBe(6);
    expect(total(text, "sluice_http_request_duration_seconds_bucket", { ...chat, le: "+Inf" })).toBe(6);
    expect(
      total(text, "sluice_http_request_duration_seconds_count", { status: "429", code: "api_key_rate_limited" }),
    ).toBe(1);
    expect(total(text, "sluice_http_request_duration_seconds_count", { status: "402" })).toBe(1);
    expect(total(text, "sluice_http_request_duration_seconds_count", { code: "invalid_api_key" })).toBe(1);
    const stream = { rpc: "sluice.completion.v1.CompletionService/StreamChatCompletion", code: "OK" };
    expect(total(text, "sluice_rpc_duration_seconds_count", stream)).toBe(2);
    expect(text).toMatch(/^sluice_rpc_duration_seconds_bucket\{le="0\.005",rpc="[^"]+",code="\w+"\} \d+$/m);

    const llama = { gen_ai_operation_name: "chat", gen_ai_request_model: "llama" };
    expect(total(text, "gen_ai_server_request_duration_seconds_count", { ...llama, error_type: "" })).toBe(3);
    expect(total(text, "gen_ai_server_request_duration_seconds_bucket", { ...llama, le: "81.92" })).toBe(3);
    expect(total(text, "gen_ai_server_time_to_first_token_seconds_count", llama)).toBe(3);
    expect(total(text, "gen_ai_server_time_to_first_token_seconds_bucket", { ...llama, le: "10" })).toBe(3);
    expect(total(text, "gen_ai_client_token_usage_count", { ...llama, gen_ai_token_type: "output" })).toBe(3);

    expect(total(text, "sluice_upstream_request_duration_seconds_count", { outcome: "ok" })).toBe(3);
    expect(total(text, "sluice_upstream_errors_total", { upstream: "llama#0", outcome: "error" })).toBe(1);
  });

  it("counts tokens and spend by model, equal to the usage records", async () => {
    const records = await usageRecordsOf(app, accountId);
    expect(records).toHaveLength(5);
    for (const model of ["service-extract", "llama"]) {
      const mine = records.filter((r) => r.model === model);
      const sum = (f: (r: (typeof mine)[number]) => bigint) => Number(mine.reduce((s, r) => s + f(r), 0n));
      // The rate-limited account's one call also ran on service-extract.
      const extra = model === "service-extract" ? 1 : 0;
      expect(total(text, "gen_ai_client_token_usage_count", { gen_ai_request_model: model })).toBe(
        2 * (mine.length + extra),
      );
      if (extra === 0) {
        expect(sample(text, "sluice_tokens_total", { model, type: "input" })).toBe(sum((r) => r.promptTokens));
        expect(sample(text, "sluice_tokens_total", { model, type: "output" })).toBe(sum((r) => r.completionTokens));
        expect(sample(text, "sluice_spend_usd_micros_total", { model })).toBe(sum((r) => r.costUsdMicros));
      } else {
        expect(sample(text, "sluice_tokens_total", { model, type: "output" })).toBeGreaterThan(
          sum((r) => r.completionTokens),
        );
      }
    }
  });

  it("counts rate-limited calls, reservation outcomes, active streams, breakers and Node's own", () => {
    expect(sample(text, "sluice_rate_limited_total")).toBe(1);
    expect(sample(text, "sluice_reservations_total", { outcome: "admitted" })).toBe(6);
    expect(sample(text, "sluice_reservations_total", { outcome: "settled" })).toBe(6);
    expect(sample(text, "sluice_reservations_total", { outcome: "refused" })).toBe(1);
    expect(sample(text, "sluice_active_streams", { role: "core" })).toBe(0);
    expect(sample(text, "sluice_active_streams", { role: "edge" })).toBe(0);
    expect(sample(text, "sluice_upstream_breaker_state", { upstream: "llama#0" })).toBe(2);
    expect(sample(text, "sluice_upstream_breaker_state", { upstream: "llama#1" })).toBe(0);
    expect(sample(text, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds \d/m);
    const commands = sample(text, "sluice_redis_commands_total");
    if (TEST_STORE === "redis") expect(commands).toBeGreaterThan(0);
    else expect(commands).toBe(0);
  });

  it("serves them on the metrics port only", async () => {
    expect((await fetch(`${app.edgeUrl}/metrics`)).status).toBe(404);
    expect((await fetch(`${app.metricsUrl}/other`)).status).toBe(404);
  });
});
