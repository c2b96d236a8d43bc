import { request, type IncomingMessage } from "node:http";
import type { Told } from "./outcomes.ts";
import { SseScanner } from "./sse-scan.ts";

/**
 * Where an HTTP client goes away. DESIGN: "when the client disconnects, at any stage from
 * before admission to the last token, the engine is cancelled and the reservation released",
 * so the soak leaves at every one of them. `slow-body` does not leave: it sends the body in
 * two parts with a pause, which keeps a call in admission for a while.
 */
export type HttpLeave =
  | { at: "none" }
  | { at: "slow-body"; ms: number }
  | { at: "before-body"; ms: number }
  | { at: "mid-body"; ms: number }
  | { at: "after-send" }
  | { at: "before-first-byte"; ms: number }
  | { at: "after-first-chunk" }
  | { at: "mid-stream"; chunks: number }
  | { at: "before-done"; on: "finish" | "usage" };

/** One call to an edge. */
export interface HttpCallPlan {
  edgeUrl: string;
  apiKey: string;
  body: string;
  leave: HttpLeave;
  /** A reader that stops reading for this long after the first bytes (backpressure). */
  pauseMs: number;
  /** The soak gives up (and counts the call as left) after this. */
  timeoutMs: number;
}

/** What the client was told, with the id when it saw one. */
export interface HttpCallResult {
  told: Told;
  id?: string;
  detail: string;
  chunks: number;
}

const LIMIT = 64 * 1024;

/** The catalogue code of an error body: `detail`, or `error.code`. */
function codeOf(text: string): string {
  try {
    const json = JSON.parse(text) as { detail?: unknown; error?: { code?: unknown } };
    if (typeof json.detail === "string") return json.detail;
    if (typeof json.error?.code === "string") return json.error.code;
  } catch {
    /* plain body, e.g. the 413 */
  }
  return text.length === 0 ? "(empty)" : "(plain)";
}

/**
 * Makes one chat call on its own connection and reports what the client was told. Never
 * rejects: every way a call can end maps to one `Told`.
 */
export function httpCall(plan: HttpCallPlan): Promise<HttpCallResult> {
  return new Promise((resolve) => {
    const url = new URL("/v1/chat/completions", plan.edgeUrl);
    const body = Buffer.from(plan.body);
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      agent: false,
      headers: {
        "content-type": "application/json",
        "content-length": String(body.length),
        authorization: `Bearer ${plan.apiKey}`,
      },
    });
    const sse = new SseScanner();
    let settled = false;
    let response: IncomingMessage | undefined;
    let timers: NodeJS.Timeout[] = [];
    const later = (ms: number, fn: () => void) => {
      timers.push(setTimeout(fn, ms));
    };

    const finish = (result: HttpCallResult) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      timers = [];
      req.destroy();
      resolve(result);
    };
    const s = sse.state;
    const withId = (r: HttpCallResult): HttpCallResult => (s.id === undefined ? r : { ...r, id: s.id });
    /** What a stream told the client, once it ends or is cut. */
    const concludeSse = (how: "end" | "cut" | "left", stage: string) => {
      const chunks = s.contentChunks;
      if (s.oddity !== undefined) return finish(withId({ told: "malformed", detail: s.oddity.slice(0, 80), chunks }));
      if (s.spendCapAbort) return finish(withId({ told: "spend-cap-abort", detail: "sse spend_cap_exceeded", chunks }));
      if (s.internalError) return finish(withId({ told: "internal-error", detail: "sse service_unavailable", chunks }));
      if (s.usage && s.done) return finish(withId({ told: "success", detail: "sse", chunks }));
      if (how === "left") return finish(withId({ told: "client-left", detail: `left ${stage}`, chunks }));
      return finish(
        withId({ told: "cut-off", detail: how === "end" ? "sse ended without a terminal event" : "sse cut", chunks }),
      );
    };
    const leave = (stage: string) => {
      if (settled) return;
      if (response && (response.headers["content-type"] ?? "").startsWith("text/event-stream"))
        return concludeSse("left", stage);
      finish({ told: "client-left", detail: `left ${stage}`, chunks: 0 });
    };
    later(plan.timeoutMs, () => leave("at the soak's timeout"));

    req.on("error", (err: NodeJS.ErrnoException) => {
      if (settled) return;
      if (response) return; // the response's own events conclude
      if (err.code === "ECONNREFUSED") return finish({ told: "unreachable", detail: "connection refused", chunks: 0 });
      finish({ told: "cut-off", detail: `before a response: ${err.code ?? err.message}`, chunks: 0 });
    });

    req.on("response", (res) => {
      response = res;
      const isSse = res.statusCode === 200 && (res.headers["content-type"] ?? "").startsWith("text/event-stream");
      let text = "";
      let paused = false;
      res.setEncoding("utf8");
      res.on("data", (piece: string) => {
        if (settled) return;
        if (plan.pauseMs > 0 && !paused) {
          paused = true;
          res.pause();
          later(plan.pauseMs, () => res.resume());
        }
        if (!isSse) {
          if (text.length < LIMIT) text += piece;
          return;
        }
        sse.feed(piece);
        // Told already: wait for the end.
        if (s.done || s.spendCapAbort || s.internalError || s.oddity !== undefined) return;
        const l = plan.leave;
        if (l.at === "after-first-chunk" && s.contentChunks >= 1) leave("after the first chunk");
        else if (l.at === "mid-stream" && s.contentChunks >= l.chunks) leave("mid-stream");
        else if (l.at === "before-done" && (l.on === "finish" ? s.finished : s.usage)) leave("just before [DONE]");
      });
      res.on("end", () => {
        if (settled) return;
        if (isSse) return concludeSse("end", "");
        if (res.statusCode !== 200)
          return finish({ told: "error-status", detail: `${res.statusCode} ${codeOf(text)}`, chunks: 0 });
        try {
          const json = JSON.parse(text) as { id?: unknown; usage?: unknown };
          if (typeof json.id === "string" && typeof json.usage === "object")
            return finish({ told: "success", id: json.id, detail: "json", chunks: 0 });
        } catch {
          /* below */
        }
        finish({ told: "malformed", detail: `json 200 without id: ${text.slice(0, 60)}`, chunks: 0 });
      });
      const cut = () => {
        if (settled || res.complete) return;
        if (isSse) return concludeSse("cut", "");
        finish({ told: "cut-off", detail: `${res.statusCode} body cut`, chunks: 0 });
      };
      res.on("aborted", cut);
      res.on("error", cut);
      res.on("close", cut);
    });

    const l = plan.leave;
    const half = Math.max(1, Math.floor(body.length / 2));
    switch (l.at) {
      case "before-body":
        req.flushHeaders();
        later(l.ms, () => leave("before sending the body"));
        break;
      case "mid-body":
        req.write(body.subarray(0, half));
        later(l.ms, () => leave("mid-body"));
        break;
      case "slow-body":
        req.write(body.subarray(0, half));
        later(l.ms, () => {
          if (!settled) req.end(body.subarray(half));
        });
        break;
      case "after-send":
        req.end(body, () => leave("right after sending"));
        break;
      case "before-first-byte":
        req.end(body, () =>
          later(l.ms, () => {
            if (!response) leave("before the first byte");
          }),
        );
        break;
      default:
        req.end(body);
    }
  });
}
