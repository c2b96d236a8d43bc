import { PassThrough } from "node:stream";
import type { ServerResponse } from "node:http";
import { describe, expect, it, vi } from "vitest";
import { createSseWriter } from "./sse.ts";

/** A stand-in response that records the head and the bytes written. */
function fakeResponse() {
  const sink = new PassThrough();
  const chunks: string[] = [];
  const res = {
    status: 0,
    headers: {} as Record<string, string>,
    writableEnded: false,
    destroyed: false,
    writeHead(status: number, headers: Record<string, string>) {
      this.status = status;
      this.headers = headers;
      return this;
    },
    flushHeaders() {},
    write(chunk: string) {
      chunks.push(chunk);
      return sink.write(chunk);
    },
    end() {
      this.writableEnded = true;
    },
  };
  return { res, text: () => chunks.join("") };
}

describe("createSseWriter", () => {
  it("writes data frames, named events and [DONE] in the SSE wire format", () => {
    const { res, text } = fakeResponse();
    const sse = createSseWriter(res as unknown as ServerResponse, 60_000);
    sse.open({ "x-request-id": "r1" });
    sse.data({ a: 1 });
    sse.event("error", { code: "spend_cap_exceeded" });
    sse.data("[DONE]");
    sse.close();
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(res.headers["x-request-id"]).toBe("r1");
    expect(text()).toBe('data: {"a":1}\n\nevent: error\ndata: {"code":"spend_cap_exceeded"}\n\ndata: [DONE]\n\n');
    expect(res.writableEnded).toBe(true);
  });

  it("refuses an event name that could break the framing", () => {
    const { res } = fakeResponse();
    const sse = createSseWriter(res as unknown as ServerResponse, 60_000);
    sse.open({});
    expect(() => sse.event("bad\nname", {})).toThrow(/invalid SSE event name/);
    sse.close();
  });

  it("sends ': keep-alive' only while the stream is idle", () => {
    vi.useFakeTimers();
    try {
      const { res, text } = fakeResponse();
      const sse = createSseWriter(res as unknown as ServerResponse, 1000);
      sse.open({});
      vi.advanceTimersByTime(900);
      sse.data({ n: 1 });
      vi.advanceTimersByTime(900);
      expect(text()).not.toContain(": keep-alive");
      vi.advanceTimersByTime(200);
      expect(text()).toBe('data: {"n":1}\n\n: keep-alive\n\n');
      sse.close();
      vi.advanceTimersByTime(5000);
      expect(text().match(/keep-alive/g)).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("opens once, however often it is asked", () => {
    const { res } = fakeResponse();
    const writeHead = vi.spyOn(res, "writeHead");
    const sse = createSseWriter(res as unknown as ServerResponse, 60_000);
    sse.open({});
    sse.open({});
    expect(writeHead).toHaveBeenCalledTimes(1);
    expect(sse.opened).toBe(true);
    sse.close();
  });
});
