import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { errorBody, replyToChat, sendJson, type Live, type ReplySettings } from "./fake-upstream-replies.ts";
import {
  FAKE_UPSTREAM_MODEL,
  type Behave,
  type ChatRequestBody,
  type FakeUpstream,
  type FakeUpstreamMode,
  type FakeUpstreamOptions,
  type RecordedRequest,
} from "./fake-upstream-types.ts";

export {
  FAKE_UPSTREAM_MODEL,
  MID_STREAM_CHUNKS,
  PROMPT_OVERHEAD_TOKENS,
  UPSTREAM_SECRETS,
} from "./fake-upstream-types.ts";
export type {
  Behave,
  ChatRequestBody,
  FakeUpstream,
  FakeUpstreamMode,
  FakeUpstreamOptions,
  RecordedRequest,
} from "./fake-upstream-types.ts";

// A real OpenAI-compatible model server on loopback (node:http only), standing in for vLLM, Ollama or
// OpenAI as the gateway's upstream. Behaviour switches between requests (`mode`) or per request
// (`behave`); every request is recorded, with whether the client aborted it.
// How it answers each mode is in fake-upstream-replies.ts.

function lowerHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers))
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

class FakeUpstreamServer implements FakeUpstream, ReplySettings {
  mode: FakeUpstreamMode = "ok";
  behave: Behave | undefined;
  apiKey: string | undefined;
  chunkDelayMs = 0;
  promptTokens: number | undefined;
  readonly requests: RecordedRequest[] = [];
  port: number;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly live = new Set<Live>();
  private readonly events = new EventEmitter();
  private readonly read = new WeakSet<RecordedRequest>();
  private chatCount = 0;
  private idCount = 0;
  private readonly options: FakeUpstreamOptions;

  constructor(options: FakeUpstreamOptions) {
    this.options = options;
    this.port = options.port ?? 0;
    this.reset();
    this.events.setMaxListeners(0);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }
  inFlight(): number {
    return this.live.size;
  }
  nextId(): string {
    return `chatcmpl-up${++this.idCount}`;
  }

  reset(): void {
    this.requests.length = 0;
    this.chatCount = 0;
    this.mode = this.options.mode ?? "ok";
    this.behave = this.options.behave;
    this.apiKey = this.options.apiKey;
    this.chunkDelayMs = this.options.chunkDelayMs ?? 0;
    this.promptTokens = this.options.promptTokens;
  }

  waitForAbort(index: number, timeoutMs = 5_000): Promise<void> {
    return this.until(() => this.requests[index]?.aborted === true, timeoutMs, `request #${index} to be aborted`).then(
      () => undefined,
    );
  }

  waitForRequest(index: number, timeoutMs = 5_000): Promise<RecordedRequest> {
    return this.until(
      () => {
        const r = this.requests[index];
        return r && this.read.has(r) ? r : undefined;
      },
      timeoutMs,
      `request #${index}`,
    );
  }

  private until<T>(probe: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const v = probe();
        if (v !== undefined && v !== false) {
          done();
          resolve(v);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`fake upstream: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.events.off("change", check);
      };
      this.events.on("change", check);
      check();
    });
  }

  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((req, res) => void this.handle(req, res));
    server.on("connection", (s: Socket) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (typeof address === "object" && address) this.port = address.port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const l of this.live) l.serverKilled = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  close(): Promise<void> {
    return this.stop();
  } // nothing else to release

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rec: RecordedRequest = {
      method: req.method ?? "",
      path: (req.url ?? "").split("?")[0] ?? "",
      headers: lowerHeaders(req),
      body: null,
      aborted: false,
      finished: false,
      mode: null,
    };
    const live: Live = { res, serverKilled: false };
    this.requests.push(rec);
    this.live.add(live);
    res.on("close", () => {
      this.live.delete(live);
      rec.finished = res.writableFinished;
      if (!res.writableFinished && !live.serverKilled) rec.aborted = true;
      this.events.emit("change");
    });
    let raw = "";
    try {
      for await (const chunk of req) raw += String(chunk);
    } catch {
      return;
    }
    try {
      const parsed: unknown = raw.length > 0 ? JSON.parse(raw) : null;
      if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) rec.body = parsed as ChatRequestBody;
    } catch {
      /* rec.body stays null */
    }
    this.read.add(rec);
    this.route(req, res, rec, live);
    this.events.emit("change");
  }

  private route(req: IncomingMessage, res: ServerResponse, rec: RecordedRequest, live: Live): void {
    if (this.apiKey !== undefined && rec.headers.authorization !== `Bearer ${this.apiKey}`) {
      sendJson(
        res,
        401,
        errorBody(
          "Incorrect API key provided (checked by http://internal-host auth)",
          "invalid_request_error",
          "invalid_api_key",
        ),
      );
      return;
    }
    if (req.method === "GET" && rec.path === "/v1/models") {
      sendJson(
        res,
        200,
        JSON.stringify({
          object: "list",
          data: [{ id: FAKE_UPSTREAM_MODEL, object: "model", created: 1_700_000_000, owned_by: "fake-upstream" }],
        }),
      );
      return;
    }
    if (req.method !== "POST" || rec.path !== "/v1/chat/completions") {
      sendJson(res, 404, errorBody(`no route ${req.method} ${rec.path}`, "invalid_request_error", "not_found"));
      return;
    }
    const body = rec.body;
    if (body === null || !Array.isArray(body.messages)) {
      sendJson(
        res,
        400,
        errorBody("body must be a JSON object with messages", "invalid_request_error", "invalid_body"),
      );
      return;
    }
    const mode = this.behave ? this.behave(this.chatCount, body) : this.mode;
    this.chatCount += 1;
    rec.mode = mode;
    replyToChat(res, body, mode, live, this);
  }
}

/** Starts a fake upstream on 127.0.0.1 (port 0 unless `options.port`). Call `close()` when done. */
export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const upstream = new FakeUpstreamServer(options);
  await upstream.start();
  return upstream;
}
