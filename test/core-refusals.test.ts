import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.ts";
import { StatusSchema } from "../gen/google/rpc/status_pb.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { grpcFrameHeader, h2Exchange, openH2c } from "./support/h2-raw.ts";

/**
 * Bodies Connect refuses before any handler runs (they do not decode) still get the catalogue's
 * ErrorInfo, after the rate limit as DESIGN orders (429 before 400), on Connect and gRPC.
 */

const PATH = "/sluice.completion.v1.CompletionService/CreateChatCompletion";

/** The reasons of a Connect unary error body. */
function connectReasons(body: Buffer): { code: unknown; reasons: string[] } {
  const error = JSON.parse(body.toString()) as { code?: unknown; details?: Array<{ type: string; value: string }> };
  const reasons = (error.details ?? [])
    .filter((d) => d.type === "google.rpc.ErrorInfo")
    .map((d) => fromBinary(ErrorInfoSchema, Buffer.from(d.value, "base64")).reason);
  return { code: error.code, reasons };
}

describe("refusals Connect makes on its own", () => {
  let app: TestApp;
  let key = "";
  let limited = "";
  beforeAll(async () => {
    app = await startTestApp();
    key = (await app.newAccount({ rps: 1000, burst: 1000 })).apiKey;
    limited = (await app.newAccount({ rps: 0.001, burst: 1 })).apiKey;
  });
  afterAll(async () => {
    await app?.close();
  });

  const connectJson = async (apiKey: string, body: string) => {
    const session = await openH2c(app.coreUrl ?? "");
    try {
      const headers = {
        ":method": "POST",
        ":path": PATH,
        "content-type": "application/json",
        authorization: `Bearer ${apiKey}`,
      };
      return await h2Exchange(session, headers, [Buffer.from(body)], { end: true, guardMs: 10_000, label: body });
    } finally {
      session.close();
    }
  };

  it.each([
    ["{not json", "invalid_json_body"],
    ["[1, 2]", "body_must_be_object"],
    ['{"params": {"messages": 5}}', "invalid_request_body"],
  ])("Connect JSON %s: 400 with ErrorInfo %s", async (body, reason) => {
    const reply = await connectJson(key, body);
    expect(reply.headers?.[":status"]).toBe(400);
    expect(connectReasons(reply.body)).toEqual({ code: "invalid_argument", reasons: [reason] });
  });

  it("a rate-limited key with a body that does not decode gets 429 first", async () => {
    expect((await connectJson(limited, "{not json")).headers?.[":status"]).toBe(400);
    const reply = await connectJson(limited, "{not json");
    expect(reply.headers?.[":status"]).toBe(429);
    expect(connectReasons(reply.body)).toEqual({ code: "resource_exhausted", reasons: ["api_key_rate_limited"] });
  });

  it("gRPC: a message that does not decode is INVALID_ARGUMENT with ErrorInfo invalid_request_body", async () => {
    const session = await openH2c(app.coreUrl ?? "");
    try {
      const garbage = Buffer.from([0x00, 0x09, 0x51, 0, 0, 0, 0, 0, 0, 0, 0]);
      const headers = {
        ":method": "POST",
        ":path": PATH,
        "content-type": "application/grpc",
        te: "trailers",
        authorization: `Bearer ${key}`,
      };
      const reply = await h2Exchange(session, headers, [grpcFrameHeader(garbage.length), garbage], {
        end: true,
        guardMs: 10_000,
        label: "grpc",
      });
      const fields = { ...reply.headers, ...reply.trailers };
      expect(fields["grpc-status"]).toBe("3");
      const status = fromBinary(StatusSchema, Buffer.from(String(fields["grpc-status-details-bin"]), "base64"));
      expect(status.details.map((d) => fromBinary(ErrorInfoSchema, d.value).reason)).toEqual(["invalid_request_body"]);
    } finally {
      session.close();
    }
  });
});
