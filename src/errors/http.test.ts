import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { firstValue, retryHeaders, toHttpError } from "./http.ts";

const links = { publicUrl: "https://llm.example" };

describe("toHttpError", () => {
  it("answers a message over the core's read limit with the plain 413", () => {
    const err = new ConnectError("message size is larger than configured readMaxBytes", Code.ResourceExhausted);
    const http = toHttpError(err, links);
    expect(http.status).toBe(413);
    expect(typeof http.body).toBe("string");
    expect(http.reason).toBe("request_too_large");
  });

  it("keeps the first of merged header values", () => {
    const err = new ConnectError("x", Code.Unavailable, {
      "x-request-id": "r1, r1",
      "x-ratelimit-remaining-requests": "9, 9",
    });
    expect(toHttpError(err, links).headers).toMatchObject({
      "x-request-id": "r1",
      "x-ratelimit-remaining-requests": "9",
    });
    expect(firstValue("7")).toBe("7");
  });

  it.each([
    [1, "1", "1"],
    [999, "1", "999"],
    [1_000, "1", "1000"],
    [1_001, "2", "1001"],
    [15_000, "15", "15000"],
    [0.2, "1", "1"],
  ])("writes a delay of %s ms as Retry-After %s and retry-after-ms %s", (ms, seconds, millis) => {
    expect(retryHeaders(ms)).toEqual({ "retry-after": seconds, "retry-after-ms": millis });
  });
});
