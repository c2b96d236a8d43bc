import { expect } from "vitest";
import { asRecord, type Reply } from "./http.ts";

const STRUCTURED_FIELDS = ["code", "docs_url", "message", "portal_url", "reason", "resolution_url", "type"];

/** Asserts SPEC's plain detail envelope: exactly `{"detail": code}`. */
export function expectDetail(reply: Reply, status: number, code: string): void {
  expect({ status: reply.status, body: reply.json }).toEqual({ status, body: { detail: code } });
  expect(reply.headers.get("content-type") ?? "").toMatch(/^application\/json/);
  expect(reply.headers.get("x-request-id")).toBeTruthy();
}

/** Asserts SPEC's structured envelope with every field, `reason` equal to `code`. */
export function expectStructured(reply: Reply, status: number, code: string, type: string): void {
  expect({
    status: reply.status,
    code: (reply.json as { error?: { code?: unknown } } | undefined)?.error?.code,
  }).toEqual({ status, code });
  const body = asRecord(reply.json);
  expect(Object.keys(body)).toEqual(["error"]);
  const error = asRecord(body.error);
  expect(Object.keys(error).sort()).toEqual(STRUCTURED_FIELDS);
  for (const field of STRUCTURED_FIELDS) expect(typeof error[field], field).toBe("string");
  expect(error.type).toBe(type);
  expect(error.reason).toBe(code);
  expect(String(error.message).length).toBeGreaterThan(0);
  for (const field of ["docs_url", "resolution_url", "portal_url"]) {
    expect(() => new URL(String(error[field])), field).not.toThrow();
  }
  expect(reply.headers.get("x-request-id")).toBeTruthy();
}

/** Asserts the headers DESIGN puts on every keyed response. */
export function expectKeyedHeaders(reply: Reply): void {
  expect(reply.headers.get("x-request-id")).toBeTruthy();
  expect(reply.headers.get("x-ratelimit-limit-requests")).toMatch(/^\d+$/);
  expect(reply.headers.get("x-ratelimit-remaining-requests")).toMatch(/^\d+$/);
  expect(reply.headers.get("x-ratelimit-reset-requests")).toBeTruthy();
}

/**
 * Asserts a retry delay as HTTP carries it: `Retry-After` in whole seconds, at least 1, and
 * `retry-after-ms` (which the OpenAI SDKs read) in integer milliseconds, the same delay that
 * `Retry-After` rounds up. Returns both.
 */
export function expectRetryHeaders(reply: Reply): { seconds: number; ms: number } {
  const value = reply.headers.get("retry-after");
  const millis = reply.headers.get("retry-after-ms");
  expect(value).toMatch(/^\d+$/);
  expect(millis).toMatch(/^\d+$/);
  const seconds = Number(value);
  const ms = Number(millis);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(seconds).toBe(Math.max(1, Math.ceil(ms / 1000)));
  return { seconds, ms };
}

/** Asserts the retry headers (`expectRetryHeaders`); returns `Retry-After`, in seconds. */
export function expectRetryAfter(reply: Reply): number {
  return expectRetryHeaders(reply).seconds;
}

/** Seconds until the next UTC calendar month begins. */
export function secondsToNextUtcMonth(nowMs = Date.now()): number {
  const d = new Date(nowMs);
  return (Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - nowMs) / 1000;
}

/** Polls `check` until it stops throwing or `timeoutMs` passes (DESIGN allows 1 s caches). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 1500): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
