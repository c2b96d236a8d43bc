import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import {
  ChatParamsSchema,
  CompletionService,
  FinishReason,
} from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { IdentityService } from "../../gen/sluice/identity/v1/identity_service_pb.ts";
import type { Engine } from "../engines/engine.ts";
import { CATALOGUE, isReason, sluiceError, type Reason } from "../errors/catalogue.ts";
import { firstValue } from "../errors/http.ts";
import { silentLogger } from "../logger.ts";
import { createCoreHandler } from "./core-handler.ts";
import { createLocalTransport } from "./local-transport.ts";
import { createCoreFixture } from "../testing/core-fixture.ts";

/**
 * The local transport must be the gRPC path without the wire: the same answers, errors
 * included, and no protobuf encoding at all.
 */

/** An engine that fails with the catalogue reason named by the last message, or answers "ok". */
const reasonEngine: Engine = {
  async *generate(request) {
    const reason = request.messages.at(-1)?.content ?? "";
    if (isReason(reason)) throw sluiceError(reason, { retryAfterMs: 2500, metadata: { source: "engine" } });
    yield { type: "delta", text: "ok", tokens: 1 };
    yield { type: "done", finishReason: FinishReason.STOP };
  },
  ready: async () => undefined,
};

const { core, newAccount, newKey } = createCoreFixture({ engine: reasonEngine });
const server = createServer(
  createCoreHandler({
    ...core,
    readMaxBytes: 1 << 20,
    logger: silentLogger,
  }),
);
let paths: Array<[string, Transport]> = [];
let key = "";
let limitedKey = "";

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  paths = [
    ["local", createLocalTransport(core.routes, core.interceptors)],
    ["grpc", createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` })],
  ];
  const { accountId, secret } = await newAccount({
    capUsdMicros: 1_000_000_000n,
    rateLimitRps: 100_000,
    burst: 100_000,
  });
  key = secret;
  limitedKey = (await newKey(accountId, { rateLimitRps: 0.001, burst: 1 })).secret;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const first = (value: string | null) => (value === null ? null : firstValue(value));

/** What a caller can observe of an error: code, reason, message, retry delay, metadata. */
function observed(err: unknown) {
  const e = ConnectError.from(err);
  const [info] = e.findDetails(ErrorInfoSchema);
  const [retry] = e.findDetails(RetryInfoSchema);
  return {
    code: Code[e.code],
    reason: info?.reason,
    domain: info?.domain,
    metadata: info?.metadata,
    message: e.rawMessage,
    // Single-valued headers, read as the edge reads them (gRPC may repeat one in headers and trailers).
    retrySeconds: retry?.retryDelay?.seconds,
    ratelimit: first(e.metadata.get("x-ratelimit-limit-requests")),
    requestId: first(e.metadata.get("x-request-id")),
  };
}

async function failureOf(transport: Transport, run: (c: ReturnType<typeof clients>) => Promise<unknown>) {
  try {
    await run(clients(transport));
  } catch (err) {
    return observed(err);
  }
  throw new Error("the call did not fail");
}

const clients = (t: Transport) => ({
  completion: createClient(CompletionService, t),
  identity: createClient(IdentityService, t),
});
const bearer = (k: string) => ({ headers: { authorization: `Bearer ${k}`, "x-request-id": "parity-request-id" } });
const ask = (content: string) => ({ params: { messages: [{ role: "user", content }] } });

/** Every catalogue reason the engine path can raise, plus the ones the rules raise on their own. */
const ENGINE_REASONS = Object.keys(CATALOGUE) as Reason[];
const RULES: Array<[string, (c: ReturnType<typeof clients>) => Promise<unknown>]> = [
  ["missing_bearer_token", (c) => c.identity.getCaller({}, { headers: { "x-request-id": "parity-request-id" } })],
  ["invalid_api_key", (c) => c.identity.getCaller({}, bearer("svc_sk_not-a-key"))],
  [
    "api_key_rate_limited",
    async (c) => {
      await c.identity.getCaller({}, bearer(limitedKey)).catch(() => undefined);
      return c.identity.getCaller({}, bearer(limitedKey));
    },
  ],
  ["invalid_request_body", (c) => c.completion.createChatCompletion({ params: { messages: [] } }, bearer(key))],
  [
    "model_not_found",
    (c) =>
      c.completion.createChatCompletion(
        { params: { model: "nope", messages: [{ role: "user", content: "hi" }] } },
        bearer(key),
      ),
  ],
  ["input_too_large", (c) => c.completion.createChatCompletion(ask("word ".repeat(40_000)), bearer(key))],
];

describe("the local transport and gRPC give the same answers", () => {
  it.each(ENGINE_REASONS)("unary: %s raised by the engine", async (reason) => {
    const [local, grpc] = await Promise.all(
      paths.map(([, t]) => failureOf(t, (c) => c.completion.createChatCompletion(ask(reason), bearer(key)))),
    );
    expect(local).toEqual(grpc);
    expect(local?.reason).toBe(reason);
  });

  it.each(ENGINE_REASONS)("stream: %s raised by the engine", async (reason) => {
    const [local, grpc] = await Promise.all(
      paths.map(([, t]) =>
        failureOf(t, async (c) => {
          for await (const _ of c.completion.streamChatCompletion(ask(reason), bearer(key))) {
            /* drain */
          }
        }),
      ),
    );
    expect({ ...local, ratelimit: undefined }).toEqual({ ...grpc, ratelimit: undefined });
    expect(local?.reason).toBe(reason);
  });

  it.each(RULES)("a rule's refusal: %s", async (reason, run) => {
    const [local, grpc] = await Promise.all(paths.map(([, t]) => failureOf(t, run)));
    // The delay of a rate-limit refusal depends on when each was asked; it is compared apart.
    expect({ ...local, retrySeconds: 0 }).toEqual({ ...grpc, retrySeconds: 0 });
    expect(Math.abs(Number(local?.retrySeconds ?? 0) - Number(grpc?.retrySeconds ?? 0))).toBeLessThanOrEqual(1);
    expect(local?.reason).toBe(reason);
  });

  it("answers a call the same way, response headers included", async () => {
    const answers = await Promise.all(
      paths.map(async ([, t]) => {
        let header: Headers | undefined;
        const res = await clients(t).completion.createChatCompletion(ask("hi"), {
          ...bearer(key),
          onHeader: (h) => {
            header = h;
          },
        });
        return {
          content: res.choices[0]?.content,
          usage: res.usage?.totalTokens,
          requestId: header?.get("x-request-id"),
          limit: header?.get("x-ratelimit-limit-requests"),
        };
      }),
    );
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]?.requestId).toBe("parity-request-id");
  });
});

describe("a one-process call encodes no protobuf message", () => {
  // An int64 beyond 64 bits: any protobuf encoding of this request throws, so the call can
  // only succeed when the message crosses as an object. (`max_tokens` above 4,096 is clamped.)
  const unencodable = () =>
    create(ChatParamsSchema, { messages: [{ role: "user", content: "hi" }], maxTokens: 2n ** 70n });

  it("a unary chat call succeeds with a message no encoder accepts", async () => {
    const local = await clients(paths[0]?.[1] as Transport).completion.createChatCompletion(
      { params: unencodable() },
      bearer(key),
    );
    expect(local.choices[0]?.content).toBe("ok");
    await expect(
      clients(paths[1]?.[1] as Transport).completion.createChatCompletion({ params: unencodable() }, bearer(key)),
    ).rejects.toThrow(/int64/);
  });

  it("a streaming chat call does too, and hands the handler's own messages to the caller", async () => {
    const events = [];
    for await (const e of clients(paths[0]?.[1] as Transport).completion.streamChatCompletion(
      { params: unencodable() },
      bearer(key),
    ))
      events.push(e.event.case);
    expect(events).toEqual(["delta", "finishReason", "usage"]);
  });
});
