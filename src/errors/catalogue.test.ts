import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import {
  CATALOGUE,
  ERROR_DOMAIN,
  isReason,
  reasonOf,
  retryAfterMsOf,
  sluiceError,
  STREAM_INTERNAL_ERROR,
  type Reason,
  UNAVAILABLE_RETRY_MS,
} from "./catalogue.ts";
import { errorBody, streamAbortPayload } from "./envelope.ts";
import { bodyTooLarge, httpErrorFor, toHttpError } from "./http.ts";

const LINKS = { publicUrl: "https://llm.example.com" };
const REASONS = Object.keys(CATALOGUE) as Reason[];

type Expected = { grpc: Code; status: number; envelope: "detail" | string };

/** SPEC and DESIGN, written out independently of the catalogue table. */
const EXPECTED: Record<string, Expected> = {
  invalid_json_body: { grpc: Code.InvalidArgument, status: 400, envelope: "detail" },
  body_must_be_object: { grpc: Code.InvalidArgument, status: 400, envelope: "detail" },
  invalid_request_body: { grpc: Code.InvalidArgument, status: 400, envelope: "detail" },
  missing_bearer_token: { grpc: Code.Unauthenticated, status: 401, envelope: "detail" },
  invalid_api_key: { grpc: Code.Unauthenticated, status: 401, envelope: "detail" },
  onboarding_incomplete: { grpc: Code.FailedPrecondition, status: 402, envelope: "billing_error" },
  spend_cap_exceeded: { grpc: Code.ResourceExhausted, status: 402, envelope: "billing_error" },
  payment_failed: { grpc: Code.FailedPrecondition, status: 402, envelope: "billing_error" },
  subscription_canceled: { grpc: Code.FailedPrecondition, status: 402, envelope: "billing_error" },
  upstream_bad_request: { grpc: Code.InvalidArgument, status: 400, envelope: "detail" },
  model_not_found: { grpc: Code.NotFound, status: 404, envelope: "detail" },
  request_too_large: { grpc: Code.ResourceExhausted, status: 413, envelope: "plain" },
  input_too_large: { grpc: Code.InvalidArgument, status: 413, envelope: "invalid_request_error" },
  api_key_rate_limited: { grpc: Code.ResourceExhausted, status: 429, envelope: "rate_limit_error" },
  service_unavailable: { grpc: Code.Unavailable, status: 503, envelope: "service_unavailable" },
  canceled: { grpc: Code.Canceled, status: 499, envelope: "detail" },
  internal_error: { grpc: Code.Internal, status: 500, envelope: "api_error" },
  admin_disabled: { grpc: Code.PermissionDenied, status: 403, envelope: "detail" },
  invalid_admin_token: { grpc: Code.Unauthenticated, status: 401, envelope: "detail" },
  account_not_found: { grpc: Code.NotFound, status: 404, envelope: "detail" },
  api_key_not_found: { grpc: Code.NotFound, status: 404, envelope: "detail" },
  webhook_endpoint_not_found: { grpc: Code.NotFound, status: 404, envelope: "detail" },
  not_found: { grpc: Code.NotFound, status: 404, envelope: "detail" },
  method_not_allowed: { grpc: Code.Unimplemented, status: 405, envelope: "detail" },
  invalid_argument: { grpc: Code.InvalidArgument, status: 400, envelope: "detail" },
};

const expectedOf = (reason: Reason): Expected => {
  const e = EXPECTED[reason];
  if (!e) throw new Error(`no expectation written for ${reason}`);
  return e;
};

/** What crosses the wire: the body as JSON text, parsed again. */
const wire = (body: object | string): unknown => (typeof body === "string" ? body : JSON.parse(JSON.stringify(body)));

describe("the catalogue", () => {
  it("holds every SPEC code", () => {
    for (const code of Object.keys(EXPECTED)) expect(isReason(code), code).toBe(true);
    expect(REASONS.sort()).toEqual(Object.keys(EXPECTED).sort());
    expect(isReason("body_must_be_objectt")).toBe(false);
  });

  it.each(REASONS)("builds %s with its code and exactly one ErrorInfo", (reason) => {
    const err = sluiceError(reason);
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(expectedOf(reason).grpc);
    const infos = err.findDetails(ErrorInfoSchema);
    expect(infos).toHaveLength(1);
    expect(infos[0]?.domain).toBe(ERROR_DOMAIN);
    expect(ERROR_DOMAIN).toBe("sluice");
    expect(infos[0]?.reason).toBe(reason);
    expect(err.findDetails(RetryInfoSchema)).toHaveLength(0);
    expect(retryAfterMsOf(err)).toBeUndefined();
    expect(reasonOf(err)).toBe(reason);
  });

  it.each(REASONS)("adds RetryInfo to %s only when a delay is given", (reason) => {
    const err = sluiceError(reason, { retryAfterMs: 1_500 });
    expect(err.findDetails(ErrorInfoSchema)).toHaveLength(1);
    const retries = err.findDetails(RetryInfoSchema);
    expect(retries).toHaveLength(1);
    expect(retries[0]?.retryDelay?.seconds).toBe(1n);
    expect(retries[0]?.retryDelay?.nanos).toBe(500_000_000);
    expect(retryAfterMsOf(err)).toBe(1_500);
  });

  it("keeps metadata, message and headers of one occurrence", () => {
    const err = sluiceError("invalid_request_body", {
      message: "messages: required",
      metadata: { field: "messages" },
      headers: { "x-request-id": "req_1" },
    });
    expect(err.rawMessage).toBe("messages: required");
    expect(err.findDetails(ErrorInfoSchema)[0]?.metadata).toEqual({ field: "messages" });
    expect(err.metadata.get("x-request-id")).toBe("req_1");
  });

  it("does not take a foreign-domain ErrorInfo or a plain error for a Sluice reason", () => {
    expect(reasonOf(new Error("payment_failed"))).toBeUndefined();
    expect(reasonOf(new ConnectError("x", Code.Internal))).toBeUndefined();
    const foreign = new ConnectError("x", Code.Internal, undefined, [
      {
        desc: ErrorInfoSchema,
        value: { $typeName: "google.rpc.ErrorInfo", reason: "payment_failed", domain: "example.com", metadata: {} },
      },
    ]);
    expect(reasonOf(foreign)).toBeUndefined();
  });
});

describe("toHttpError", () => {
  it.each(REASONS)("maps %s to its status and envelope", (reason) => {
    const expected = expectedOf(reason);
    const http = toHttpError(sluiceError(reason), LINKS);
    expect(http.status).toBe(expected.status);
    expect(http.reason).toBe(reason);
    const body = wire(http.body);
    if (expected.envelope === "plain") {
      expect(body).toBe("Request body too large\n");
      return;
    }
    if (expected.envelope === "detail") {
      expect(body).toEqual({ detail: reason });
      return;
    }
    const error = (body as { error: Record<string, unknown> }).error;
    expect(Object.keys(body as object)).toEqual(["error"]);
    expect(error).toMatchObject({ type: expected.envelope, code: reason, reason });
    expect(typeof error.message).toBe("string");
    expect(String(error.message).length).toBeGreaterThan(0);
    for (const field of ["docs_url", "resolution_url", "portal_url"]) {
      expect(() => new URL(String(error[field])), field).not.toThrow();
    }
    expect(error.portal_url).toBe("https://llm.example.com/console");
    expect(error.docs_url).toBe(`https://llm.example.com/docs/errors/${reason}`);
    const page = http.status === 402 ? "billing" : http.status === 429 || http.status === 413 ? "keys" : "status";
    expect(error.resolution_url).toBe(`https://llm.example.com/console/${page}`);
  });

  it("uses the structured envelope for every 402, 413, 429 and 503 (but SPEC's plain 413 for a body)", () => {
    for (const reason of REASONS.filter((r) => r !== "request_too_large")) {
      const { status, body } = toHttpError(sluiceError(reason), LINKS);
      const structured = typeof body === "object" && "error" in body;
      if ([402, 413, 429, 503].includes(status)) expect(structured, reason).toBe(true);
      if ([400, 401, 404].includes(status)) expect(structured, reason).toBe(false);
    }
  });

  it.each([
    [100, "1"],
    [0, "1"],
    [999, "1"],
    [1_000, "1"],
    [1_001, "2"],
    [1_500, "2"],
    [1_339_200_000, "1339200"],
  ])("sets Retry-After for a delay of %i ms to %s, and retry-after-ms to the exact delay", (ms, header) => {
    for (const reason of ["api_key_rate_limited", "service_unavailable", "spend_cap_exceeded"] as const) {
      const { headers } = toHttpError(sluiceError(reason, { retryAfterMs: ms }), LINKS);
      expect(headers["retry-after"], reason).toBe(header);
      expect(headers["retry-after-ms"], reason).toBe(String(ms));
    }
  });

  it("always sets Retry-After and retry-after-ms on a 503, and neither on errors without a delay", () => {
    const delay = { "retry-after": "1", "retry-after-ms": String(UNAVAILABLE_RETRY_MS) };
    expect(toHttpError(sluiceError("service_unavailable"), LINKS).headers).toEqual(delay);
    expect(toHttpError(new ConnectError("upstream down", Code.Unavailable), LINKS)).toMatchObject({
      status: 503,
      reason: "service_unavailable",
      headers: delay,
    });
    const { headers } = toHttpError(sluiceError("invalid_api_key"), LINKS);
    expect(headers["retry-after"]).toBeUndefined();
    expect(headers["retry-after-ms"]).toBeUndefined();
  });

  it("forwards rate-limit headers and the request id, and nothing else", () => {
    const err = sluiceError("api_key_rate_limited", {
      retryAfterMs: 100,
      headers: {
        "x-ratelimit-remaining-requests": "0",
        "x-request-id": "req_9",
        "set-cookie": "a=b",
        "x-internal": "1",
      },
    });
    const { headers } = toHttpError(err, LINKS);
    expect(headers).toEqual({
      "x-ratelimit-remaining-requests": "0",
      "x-request-id": "req_9",
      "retry-after": "1",
      "retry-after-ms": "100",
    });
  });

  it("turns unknown errors into internal_error 500 without leaking their message", () => {
    for (const thrown of [
      new Error("db password hunter2"),
      new ConnectError("db password hunter2", Code.Internal),
      "db password hunter2",
      { oops: "hunter2" },
    ]) {
      const http = toHttpError(thrown, LINKS);
      expect(http.status).toBe(500);
      expect(http.reason).toBe("internal_error");
      expect(JSON.stringify(http.body)).not.toContain("hunter2");
      expect((wire(http.body) as { error: { code: string } }).error.code).toBe("internal_error");
    }
  });

  it("keeps the catalogue message of a catalogue error", () => {
    const http = toHttpError(sluiceError("spend_cap_exceeded", { retryAfterMs: 1 }), LINKS);
    expect((wire(http.body) as { error: { message: string } }).error.message).toBe(
      CATALOGUE.spend_cap_exceeded.message,
    );
  });

  it("builds edge-raised errors and the plain 413 without a code", () => {
    expect(httpErrorFor("missing_bearer_token", LINKS)).toMatchObject({
      status: 401,
      body: { detail: "missing_bearer_token" },
    });
    expect(httpErrorFor("body_must_be_object", LINKS)).toMatchObject({
      status: 400,
      body: { detail: "body_must_be_object" },
    });
    const plain = bodyTooLarge();
    expect(plain.status).toBe(413);
    expect(plain.body).toBe("Request body too large\n");
    expect(JSON.stringify(plain.body)).not.toContain('too_large"');
  });

  it("builds the stream payloads of SPEC", () => {
    expect(streamAbortPayload("spend_cap_exceeded", LINKS)).toMatchObject({ code: "spend_cap_exceeded" });
    expect(Object.keys(streamAbortPayload("spend_cap_exceeded", LINKS)).sort()).toEqual([
      "code",
      "docs_url",
      "message",
    ]);
    expect(streamAbortPayload("spend_cap_exceeded", LINKS, "held")).toMatchObject({ message: "held" });
    expect(STREAM_INTERNAL_ERROR).toEqual({ error: "service_unavailable", status: 500 });
    expect(errorBody("payment_failed", LINKS)).toMatchObject({
      error: { type: "billing_error", code: "payment_failed" },
    });
  });
});
