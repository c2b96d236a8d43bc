import { once } from "node:events";
import { connect as h2connect, constants, type ClientHttp2Session, type Settings } from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import {
  ChatParamsSchema,
  StreamChatCompletionRequestSchema,
} from "../gen/sluice/completion/v1/completion_service_pb.ts";
import { gatedEngine, registryWith } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { grpcFrameHeader, h2Exchange, openH2c, sessionClosed, type H2Reply } from "./support/h2-raw.ts";
import { openRaw } from "./support/raw-socket.ts";
import { GUARD_MS, within } from "./support/within.ts";

/**
 * Issue 7, defect 6, on the core's h2c port: its stream cap, its request timeout (for requests
 * that are not whole, never for answers that take long) and its idle timeout (for sessions with
 * no traffic, never for a quiet call). The edge's limits are in limits.test.ts.
 */

describe("core h2c limits (issue 7, defect 6)", () => {
  const MAX_STREAMS = 7;
  const REQUEST_TIMEOUT_MS = 500;
  const IDLE_TIMEOUT_MS = 1000;
  /** Whole calls whose answers take longer than the request timeout, one gated model each. */
  const SLOW_CALLS = [
    { name: "a Connect server stream", model: "gated-connect-stream" },
    { name: "a gRPC server stream", model: "gated-grpc-stream" },
    { name: "a Connect unary call", model: "gated-connect-unary" },
  ] as const;
  const engines = new Map([...SLOW_CALLS.map((c) => c.model), "gated-quiet"].map((model) => [model, gatedEngine()]));
  const engineOf = (model: string) => {
    const engine = engines.get(model);
    if (!engine) throw new Error(`no engine ${model}`);
    return engine;
  };
  let app: TestApp;
  let coreUrl: string;
  let apiKey: string;
  beforeAll(async () => {
    app = await startTestApp(
      {
        SLUICE_MAX_STREAMS_PER_CONNECTION: String(MAX_STREAMS),
        SLUICE_HEADERS_TIMEOUT_MS: "300",
        SLUICE_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        SLUICE_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
      },
      { models: registryWith([...engines].map(([name, engine]) => ({ name, engine }))) },
    );
    coreUrl = app.coreUrl ?? "";
    ({ apiKey } = await app.newAccount({ rps: 1000, burst: 1000 }));
  });
  afterAll(async () => {
    for (const engine of engines.values()) engine.open();
    await app?.close();
  });

  const params = (model: string) =>
    create(ChatParamsSchema, { model, messages: [{ role: "user", content: "Where do rivers carry water?" }] });
  const CHAT_PATH = "/sluice.completion.v1.CompletionService/";

  /**
   * Opens a chat call on `model` with a whole request, in the protocol and shape its name says
   * (Connect streaming by default).
   */
  const slowCall = (session: ClientHttp2Session, model: string, label: string) => {
    const headers = { ":method": "POST", authorization: `Bearer ${apiKey}` };
    const options = { end: true, guardMs: 4 * GUARD_MS, label };
    if (model.includes("grpc")) {
      const message = Buffer.from(
        toBinary(
          StreamChatCompletionRequestSchema,
          create(StreamChatCompletionRequestSchema, { params: params(model) }),
        ),
      );
      return h2Exchange(
        session,
        { ...headers, ":path": `${CHAT_PATH}StreamChatCompletion`, "content-type": "application/grpc", te: "trailers" },
        [grpcFrameHeader(message.length), message],
        options,
      );
    }
    const json = Buffer.from(JSON.stringify({ params: toJson(ChatParamsSchema, params(model)) }));
    if (model.includes("unary")) {
      return h2Exchange(
        session,
        {
          ...headers,
          ":path": `${CHAT_PATH}CreateChatCompletion`,
          "content-type": "application/json",
          "connect-protocol-version": "1",
        },
        [json],
        options,
      );
    }
    // Connect's envelope: a flags byte and a length, as gRPC's.
    return h2Exchange(
      session,
      {
        ...headers,
        ":path": `${CHAT_PATH}StreamChatCompletion`,
        "content-type": "application/connect+json",
        "connect-protocol-version": "1",
      },
      [grpcFrameHeader(json.length), json],
      options,
    );
  };

  /** Asserts a whole, successful answer (gRPC status 0 for gRPC) that carried the gated engine's text. */
  const expectAnswered = (reply: H2Reply) => {
    expect({ status: reply.headers?.[":status"], ended: reply.ended }).toEqual({ status: 200, ended: true });
    if (String(reply.headers?.["content-type"]).startsWith("application/grpc"))
      expect(reply.trailers?.["grpc-status"]).toBe("0");
    const text = reply.body.toString("utf8");
    expect(text).toContain("Rivers");
    expect(text).not.toContain('"error"');
  };

  it("advertises SLUICE_MAX_STREAMS_PER_CONNECTION as its maxConcurrentStreams", async () => {
    const session = h2connect(coreUrl);
    try {
      const [settings] = (await within(once(session, "remoteSettings"), GUARD_MS, "no SETTINGS from the core")) as [
        Settings,
      ];
      expect(settings.maxConcurrentStreams).toBe(MAX_STREAMS);
      expect(session.remoteSettings.maxConcurrentStreams).toBe(MAX_STREAMS);
    } finally {
      session.destroy();
    }
  });

  it("resets a keyed call whose request is not whole within the request timeout", async () => {
    const session = await openH2c(coreUrl);
    try {
      const headers = {
        ":method": "POST",
        ":path": "/sluice.completion.v1.CompletionService/CreateChatCompletion",
        "content-type": "application/json",
        "content-length": "1000",
        authorization: `Bearer ${apiKey}`,
      };
      const startedAt = Date.now();
      const reply = await h2Exchange(session, headers, [Buffer.from('{"params":{')], {
        end: false,
        guardMs: GUARD_MS,
        label: "a half-open stream with a valid key",
      });
      expect({ headers: reply.headers, rstCode: reply.rstCode }).toEqual({
        headers: undefined,
        rstCode: constants.NGHTTP2_CANCEL,
      });
      // A reset, not a refusal: it came once the request timeout had passed.
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 20);
      // Only the stream is reset; the session still serves.
      const ok = await h2Exchange(
        session,
        {
          ":method": "POST",
          ":path": "/sluice.completion.v1.CompletionService/ListModels",
          "content-type": "application/json",
          authorization: `Bearer ${apiKey}`,
        },
        [Buffer.from("{}")],
        { end: true, guardMs: GUARD_MS, label: "ListModels after the reset" },
      );
      expect(ok.headers?.[":status"]).toBe(200);
    } finally {
      session.destroy();
    }
  });

  it.each(SLOW_CALLS)(
    "does not reset $name whose request is whole but whose answer takes longer than the request timeout",
    async ({ name, model }) => {
      const session = await openH2c(coreUrl);
      const engine = engineOf(model);
      try {
        const slow = slowCall(session, model, `${name} held past the request timeout`);
        await within(engine.startedCalls(1), GUARD_MS, `${name} never reached its engine`);
        // A half-open probe opened after the call is reset once the request timeout passes: by
        // then the call, older and whole, has outlived the request timeout too.
        const probe = await h2Exchange(
          session,
          {
            ":method": "POST",
            ":path": `${CHAT_PATH}CreateChatCompletion`,
            "content-type": "application/grpc",
            te: "trailers",
            authorization: `Bearer ${apiKey}`,
          },
          [grpcFrameHeader(100)],
          { end: false, guardMs: GUARD_MS, label: "a half-open probe stream" },
        );
        expect(probe.rstCode).toBe(constants.NGHTTP2_CANCEL);
        engine.open();
        expectAnswered(await slow);
      } finally {
        session.destroy();
      }
    },
  );

  it("closes an idle session after SLUICE_IDLE_TIMEOUT_MS", async () => {
    const session = await openH2c(coreUrl);
    try {
      await sessionClosed(session, IDLE_TIMEOUT_MS + GUARD_MS, "an idle h2c session was never closed");
      expect(session.closed || session.destroyed).toBe(true);
    } finally {
      session.destroy();
    }
  });

  it("closes a connection that never finishes the HTTP/2 preface after SLUICE_IDLE_TIMEOUT_MS", async () => {
    const conn = await openRaw(coreUrl);
    try {
      conn.socket.write("PRI * HTTP/2.0\r\n");
      await conn.closed(IDLE_TIMEOUT_MS + GUARD_MS, "a connection with half a preface was never closed");
      expect(conn.isClosed()).toBe(true);
    } finally {
      conn.socket.destroy();
    }
  });

  it("keeps a session whose call is quiet for longer than the idle timeout", async () => {
    const session = await openH2c(coreUrl);
    let idle: ClientHttp2Session | undefined;
    try {
      const quietEngine = engineOf("gated-quiet");
      const streaming = slowCall(session, "gated-quiet", "a call quiet for longer than the idle timeout");
      await within(quietEngine.startedCalls(1), GUARD_MS, "the quiet call never reached its engine");
      // A session opened after the call's last frame is closed for idleness first: by then the
      // call's session has had no traffic for longer than the idle timeout too.
      idle = await openH2c(coreUrl);
      await sessionClosed(idle, IDLE_TIMEOUT_MS + GUARD_MS, "an idle h2c session was never closed");
      quietEngine.open();
      expectAnswered(await streaming);
      // Once its call is over the session is idle, and closed like any other.
      await sessionClosed(session, IDLE_TIMEOUT_MS + GUARD_MS, "a session was never closed once its call had ended");
    } finally {
      session.destroy();
      idle?.destroy();
    }
  });
});
