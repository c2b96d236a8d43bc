import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionService } from "../gen/sluice/completion/v1/completion_service_pb.ts";
import { createLogger } from "../src/logger.ts";
import { startFakeUpstream, type FakeUpstream } from "./support/fake-upstream.ts";
import { ADMIN_TOKEN } from "./support/harness.ts";
import { usageRecordsOf } from "./support/ledger.ts";
import { startUpstreamApp, type UpstreamApp } from "./support/upstream-app.ts";

type Line = Record<string, unknown>;

const UPSTREAM_KEY = "sk-upstream-key-never-logged-7f3a";

/**
 * The access lines (issue 9): one per HTTP request and one per RPC, a stream's at its end,
 * each with the request id, the caller's ids, the model, the status and code, the tokens, the
 * cost, the duration and the time to first token; domain lines with the request id; and no
 * secret anywhere an operator or a caller can read (logs, error bodies, metrics).
 */
describe("access lines", () => {
  let app: UpstreamApp;
  let upstream: FakeUpstream;
  const raw: string[] = [];
  const lines = () => raw.map((l) => JSON.parse(l) as Line);
  const bodies: string[] = [];
  let apiKey = "";
  let accountId = "";
  let apiKeyId = "";

  const chat = async (requestId: string, model: string, stream: boolean, key = apiKey) => {
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-request-id": requestId },
      body: JSON.stringify({ model, stream, max_tokens: 12, messages: [{ role: "user", content: "Say hello." }] }),
    });
    const body = await res.text();
    bodies.push(body);
    return { status: res.status, body };
  };
  const only = (msg: string, match: Line) => {
    const found = lines().filter((l) => l.msg === msg && Object.entries(match).every(([k, v]) => l[k] === v));
    expect(found, `${msg} lines matching ${JSON.stringify(match)}`).toHaveLength(1);
    return found[0] as Line;
  };

  beforeAll(async () => {
    upstream = await startFakeUpstream({ apiKey: UPSTREAM_KEY, chunkDelayMs: 20 });
    app = await startUpstreamApp([{ name: "llama", baseUrl: upstream.url, apiKeyEnv: "LLAMA_KEY" }], {
      lookupEnv: { LLAMA_KEY: UPSTREAM_KEY },
      app: { logger: createLogger("debug", (line) => void raw.push(line)) },
    });
    ({ apiKey, accountId, apiKeyId } = await app.newAccount());
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.stop();
  });

  it("writes one edge line and one line per RPC for a JSON call, with ids, tokens and cost", async () => {
    expect((await chat("req-json-1", "llama", false)).status).toBe(200);
    const [record] = (await usageRecordsOf(app, accountId)).filter((r) => r.model === "llama");
    if (!record) throw new Error("no usage record");
    const billed = {
      accountId,
      apiKeyId,
      model: "llama",
      promptTokens: Number(record.promptTokens),
      completionTokens: Number(record.completionTokens),
      costUsdMicros: Number(record.costUsdMicros),
    };
    const edge = only("http", { requestId: "req-json-1" });
    expect(edge).toMatchObject({ level: "info", method: "POST", route: "/v1/chat/completions", status: 200 });
    expect(edge).toMatchObject(billed);
    expect(edge.durationMs).toBeTypeOf("number");
    const rpc = only("rpc", {
      requestId: "req-json-1",
      rpc: "sluice.completion.v1.CompletionService/CreateChatCompletion",
    });
    expect(rpc).toMatchObject({ code: "OK", ...billed });
    expect(rpc.ttftMs).toBeLessThanOrEqual(rpc.durationMs as number);
    only("rpc", { requestId: "req-json-1", rpc: "sluice.identity.v1.IdentityService/CheckApiKey" });
    // The request id went on to the model server too.
    expect(upstream.requests.at(-1)?.headers["x-request-id"]).toBe("req-json-1");
  });

  it("writes a stream's lines at its end, with its time to first token", async () => {
    const reply = await chat("req-sse-1", "llama", true);
    expect(reply.body.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const edge = only("http", { requestId: "req-sse-1" });
    const rpc = only("rpc", {
      requestId: "req-sse-1",
      rpc: "sluice.completion.v1.CompletionService/StreamChatCompletion",
    });
    for (const line of [edge, rpc]) {
      expect(line).toMatchObject({ accountId, apiKeyId, model: "llama" });
      // Tokens and cost are known only once the stream has ended: the line was written then.
      expect(line.completionTokens).toBeGreaterThan(0);
      expect(line.costUsdMicros).toBeGreaterThan(0);
      // Deltas come 20 ms apart: the first token is well before the end.
      expect(line.ttftMs).toBeLessThan((line.durationMs as number) - 20);
    }
  });

  it("writes refusals with their status and code, and direct RPCs with theirs", async () => {
    expect((await chat("req-bad-key", "llama", false, "sk-live-not-a-key-0000")).status).toBe(401);
    expect(only("http", { requestId: "req-bad-key" })).toMatchObject({ status: 401, code: "invalid_api_key" });
    const client = createClient(CompletionService, createGrpcTransport({ baseUrl: app.coreUrl ?? "" }));
    await expect(
      client.createChatCompletion(
        { params: { model: "no-such-model", messages: [{ role: "user", content: "hi" }] } },
        { headers: { authorization: `Bearer ${apiKey}`, "x-request-id": "req-grpc-1" } },
      ),
    ).rejects.toThrow();
    expect(only("rpc", { requestId: "req-grpc-1" })).toMatchObject({
      code: "NotFound",
      reason: "model_not_found",
      accountId,
      apiKeyId,
    });
  });

  it("gives domain lines the request id", async () => {
    upstream.mode = "die-mid-stream";
    await chat("req-dies", "llama", true);
    upstream.mode = "ok";
    const warn = lines().find((l) => l.msg === "upstream call failed");
    expect(warn).toMatchObject({ level: "warn", requestId: "req-dies", upstream: "llama#0" });
  });

  it("never shows a key, the admin token or the upstream key in logs, error bodies or metrics", async () => {
    const created = await app.admin.createApiKey({ accountId }, { headers: app.adminHeaders });
    // A wrong admin token and a wrong key, whose refusals could echo what they were given.
    await app.admin.getAccount({ accountId }, { headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } }).catch(() => 0);
    await chat("req-echo", "llama", false, `${created.secret}x`);
    upstream.mode = "status-500";
    await chat("req-upstream-500", "llama", false);
    upstream.mode = "ok";
    const metrics = await (await fetch(`${app.metricsUrl}/metrics`)).text();
    const visible = [...raw, ...bodies, metrics].join("\n");
    expect(raw.length).toBeGreaterThan(10);
    for (const secret of [apiKey, created.secret, ADMIN_TOKEN, UPSTREAM_KEY, upstream.url]) {
      expect(secret.length).toBeGreaterThan(10);
      expect(visible.includes(secret), `a secret (${secret.slice(0, 6)}...) leaked`).toBe(false);
    }
  });
});
