import { status as GrpcStatus, type Client, type Metadata } from "@grpc/grpc-js";
import type { MethodDefinition } from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { generateApiKey } from "../src/services/auth/api-key.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import {
  grpcClient,
  isServiceError,
  loadProtos,
  metadataOf,
  methodOf,
  richStatusOf,
  serverStream,
  unary,
} from "./support/grpc.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { CHAT_MESSAGES } from "./support/http.ts";

/**
 * Internal callers on the core port with a stock gRPC stack: @grpc/grpc-js plus stubs built
 * from `proto/` by @grpc/proto-loader. The core must give them the same rules as the edge,
 * and errors as google.rpc.Status with one ErrorInfo (domain sluice).
 */
const callerSchema = z.object({ id: z.string(), apiKeyId: z.string(), email: z.string().optional() });
const usageSchema = z.object({ promptTokens: z.string(), completionTokens: z.string(), totalTokens: z.string() });
const streamEventSchema = z.object({
  id: z.string(),
  model: z.string(),
  created: z.string(),
  event: z.enum(["delta", "finishReason", "usage"]),
  delta: z.string().optional(),
  finishReason: z.string().optional(),
  usage: usageSchema.optional(),
});
const unaryChatSchema = z.object({
  id: z.string(),
  model: z.string(),
  choices: z.array(z.object({ content: z.string(), finishReason: z.string() })),
  usage: usageSchema,
  // Deprecated (the answer is `choices`), still filled with choice 0 for clients built before it.
  content: z.string(),
  finishReason: z.string(),
});

let app: TestApp;
let client: Client;
let getCaller: MethodDefinition<object, object>;
let streamChat: MethodDefinition<object, object>;
let createChat: MethodDefinition<object, object>;

const params = { params: { model: "service-extract", messages: CHAT_MESSAGES, temperature: 0 } };
const bearer = (key: string): Metadata => metadataOf({ authorization: `Bearer ${key}` });

async function failure(promise: Promise<unknown>) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isServiceError(err)) throw new Error(`expected a gRPC error, got ${String(err)}`);
  return err;
}

beforeAll(async () => {
  app = await startTestApp();
  if (!app.coreUrl) throw new Error("no core");
  client = grpcClient(app.coreUrl);
  const protos = loadProtos();
  getCaller = methodOf(protos, "sluice.identity.v1.IdentityService", "GetCaller");
  streamChat = methodOf(protos, "sluice.completion.v1.CompletionService", "StreamChatCompletion");
  createChat = methodOf(protos, "sluice.completion.v1.CompletionService", "CreateChatCompletion");
});

afterAll(async () => {
  client?.close();
  await app?.close();
});

describe("grpc-js against the core", () => {
  it("IdentityService/GetCaller names the account and key, with rate-limit headers", async () => {
    const { apiKey, apiKeyId, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const { response, headers } = await unary(client, getCaller, {}, bearer(apiKey));
    const caller = callerSchema.parse(response);
    expect(caller).toEqual({ id: accountId, apiKeyId });
    expect(headers.get("x-request-id")[0]).toBeTruthy();
    expect(headers.get("x-ratelimit-limit-requests")[0]).toBe("1000");
  });

  it("CompletionService/StreamChatCompletion streams deltas, then the finish, then the usage", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const { messages, error } = await serverStream(client, streamChat, params, bearer(apiKey));
    expect(error).toBeUndefined();
    const events = messages.map((m) => streamEventSchema.parse(m));
    expect(events.length).toBeGreaterThanOrEqual(3);
    const last = events[events.length - 1];
    const finish = events[events.length - 2];
    const deltas = events.slice(0, -2);
    for (const e of deltas) expect(e.event).toBe("delta");
    expect(finish?.event).toBe("finishReason");
    expect(finish?.finishReason).toBe("FINISH_REASON_STOP");
    expect(last?.event).toBe("usage");
    const id = events[0]?.id ?? "";
    expect(id).toMatch(/^chatcmpl-/);
    for (const e of events) expect({ id: e.id, model: e.model }).toEqual({ id, model: "service-extract" });

    const usage = last?.usage;
    expect(Number(usage?.totalTokens)).toBe(Number(usage?.promptTokens) + Number(usage?.completionTokens));
    expect(Number(usage?.completionTokens)).toBeGreaterThan(0);

    const whole = unaryChatSchema.parse((await unary(client, createChat, params, bearer(apiKey))).response);
    expect(whole.choices).toHaveLength(1);
    expect(deltas.map((e) => e.delta ?? "").join("")).toBe(whole.choices[0]?.content);
    expect(whole.usage).toEqual(usage);
    expect(whole.choices[0]?.finishReason).toBe("FINISH_REASON_STOP");
    expect({ content: whole.content, finishReason: whole.finishReason }).toEqual(whole.choices[0]);

    const records = await usageRecordsOf(app, accountId);
    expect(records.map((r) => r.id).sort()).toEqual([id, whole.id].sort());
  });
});

describe("gRPC errors carry google.rpc.Status details", () => {
  it("no authorization: UNAUTHENTICATED with ErrorInfo missing_bearer_token", async () => {
    const err = await failure(unary(client, getCaller, {}, metadataOf({})));
    expect(err.code).toBe(GrpcStatus.UNAUTHENTICATED);
    const rich = richStatusOf(err);
    expect(rich.code).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(rich.errorInfos).toHaveLength(1);
    expect(rich.errorInfos[0]?.reason).toBe("missing_bearer_token");
    expect(rich.errorInfos[0]?.domain).toBe("sluice");
  });

  it("unknown key on a stream: UNAUTHENTICATED with ErrorInfo invalid_api_key", async () => {
    const { messages, error } = await serverStream(client, streamChat, params, bearer(generateApiKey()));
    expect(messages).toHaveLength(0);
    if (!error) throw new Error("expected an error");
    expect(error.code).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(richStatusOf(error).errorInfos.map((i) => i.reason)).toEqual(["invalid_api_key"]);
  });

  it("rate limit: RESOURCE_EXHAUSTED with api_key_rate_limited and RetryInfo", async () => {
    const { apiKey } = await app.newAccount({ rps: 1, burst: 1 });
    await unary(client, getCaller, {}, bearer(apiKey));
    const err = await failure(unary(client, getCaller, {}, bearer(apiKey)));
    expect(err.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    const rich = richStatusOf(err);
    expect(rich.errorInfos.map((i) => i.reason)).toEqual(["api_key_rate_limited"]);
    expect(rich.retryInfos).toHaveLength(1);
    const delay = rich.retryInfos[0]?.retryDelay;
    expect(Number(delay?.seconds ?? 0n) * 1000 + (delay?.nanos ?? 0) / 1e6).toBeGreaterThan(0);
  });

  it("a direct caller cannot skip the rate limit by claiming to be the edge", async () => {
    const { apiKey } = await app.newAccount({ rps: 1, burst: 1 });
    const spoofed = metadataOf({ authorization: `Bearer ${apiKey}`, "sluice-edge-preflight": "x".repeat(43) });
    await unary(client, createChat, params, spoofed);
    const err = await failure(unary(client, createChat, params, spoofed));
    expect(err.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(richStatusOf(err).errorInfos.map((i) => i.reason)).toEqual(["api_key_rate_limited"]);
  });

  it("spend cap on a stream: RESOURCE_EXHAUSTED spend_cap_exceeded before any message, nothing billed", async () => {
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: 1n, rps: 1000, burst: 1000 });
    const { messages, error } = await serverStream(client, streamChat, params, bearer(apiKey));
    expect(messages).toHaveLength(0);
    if (!error) throw new Error("expected an error");
    expect(error.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    const rich = richStatusOf(error);
    expect(rich.errorInfos.map((i) => i.reason)).toEqual(["spend_cap_exceeded"]);
    expect(rich.retryInfos).toHaveLength(1);
    expect((await balanceOf(app, accountId)).spent).toBe(0n);
  });

  it("unknown model: NOT_FOUND model_not_found; bad params: INVALID_ARGUMENT", async () => {
    const { apiKey } = await app.newAccount({ rps: 1000, burst: 1000 });
    const notFound = await failure(
      unary(client, createChat, { params: { model: "nope", messages: CHAT_MESSAGES } }, bearer(apiKey)),
    );
    expect(notFound.code).toBe(GrpcStatus.NOT_FOUND);
    expect(richStatusOf(notFound).errorInfos.map((i) => i.reason)).toEqual(["model_not_found"]);
    const invalid = await failure(unary(client, createChat, { params: { messages: [] } }, bearer(apiKey)));
    expect(invalid.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(richStatusOf(invalid).errorInfos).toHaveLength(1);
  });
});
