import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

// A real OpenAI-compatible model server on loopback (node:http only), standing in for vLLM, Ollama or
// OpenAI as the gateway's upstream. Behaviour switches between requests (`mode`) or per request
// (`behave`); every request is recorded, with whether the client aborted it.

/** How the server answers `POST /v1/chat/completions`. `GET /v1/models` always answers normally. */
export type FakeUpstreamMode =
  | "ok"
  | "no-usage"
  | "stall-before-headers"
  | "stall-mid-stream"
  | "die-mid-stream"
  | "status-429"
  | "status-500"
  | "status-400";

/** The one model `GET /v1/models` lists (any requested model is accepted and echoed). */
export const FAKE_UPSTREAM_MODEL = "meta-llama/Llama-3.1-8B-Instruct";
/** Strings planted in every upstream error body; the gateway must never pass them on. */
export const UPSTREAM_SECRETS = ["sk-upstream-SECRET", "http://internal-host", "10.20.30.40"] as const;
/** Prompt-token count when `promptTokens` is not set: words of all message contents plus this. */
export const PROMPT_OVERHEAD_TOKENS = 10;
/** Chunks (role chunk included) a `stall-mid-stream` / `die-mid-stream` stream sends first. */
export const MID_STREAM_CHUNKS = 3;

/** The request body as received; nothing is guaranteed beyond it being a JSON object. */
export interface ChatRequestBody {
  model?: string;
  messages?: Array<{ role?: string; content?: unknown }>;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  [key: string]: unknown;
}

/** Chooses the mode of one chat request: `n` counts chat-completion requests from 0. */
export type Behave = (n: number, body: ChatRequestBody) => FakeUpstreamMode;

export interface RecordedRequest {
  method: string;
  path: string; // without the query string, e.g. "/v1/chat/completions"
  headers: Record<string, string>; // lowercased names; repeated headers joined with ", "
  body: ChatRequestBody | null; // the parsed body if it was a JSON object (null while being read)
  aborted: boolean; // the client closed the connection before the response was finished
  finished: boolean; // the response was completely written
  mode: FakeUpstreamMode | null; // the mode a chat request was answered in; else null
}

export interface FakeUpstreamOptions {
  port?: number; // default 0: any free port
  mode?: FakeUpstreamMode; // default "ok"
  behave?: Behave; // when set, overrides `mode` for each chat request
  apiKey?: string; // when set, requests without `authorization: Bearer <apiKey>` get 401
  chunkDelayMs?: number; // pause after every stream chunk, default 0
  promptTokens?: number; // fixed prompt_tokens; default: words of all messages + PROMPT_OVERHEAD_TOKENS
}

export interface FakeUpstream {
  readonly url: string; // "http://127.0.0.1:PORT/v1"
  readonly port: number;
  // Settings below are read at each request and may be changed at any time.
  mode: FakeUpstreamMode;
  behave: Behave | undefined;
  apiKey: string | undefined;
  chunkDelayMs: number;
  promptTokens: number | undefined;
  readonly requests: RecordedRequest[];
  /** Requests whose response has not closed yet. */
  inFlight(): number;
  /** Resolves once request #index (it may not have arrived yet) was aborted by the client. */
  waitForAbort(index: number, timeoutMs?: number): Promise<void>;
  /** Resolves with request #index once it has arrived and its body has been read. */
  waitForRequest(index: number, timeoutMs?: number): Promise<RecordedRequest>;
  /** Forgets recorded requests and restores the settings given at start. */
  reset(): void;
  /** Closes the listener and destroys every socket: further connections are refused. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  /** Final cleanup (same as stop). */
  close(): Promise<void>;
}

interface Answer {
  words: string[];
  finish: "stop" | "length";
  promptTokens: number;
}
interface Live {
  res: ServerResponse;
  serverKilled: boolean;
}

const ERRORS: Record<400 | 429 | 500, { type: string; code: string }> = {
  400: { type: "invalid_request_error", code: "invalid_value" },
  429: { type: "requests", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: "internal_error" },
};

const errorBody = (message: string, type: string, code: string): string =>
  JSON.stringify({ error: { message, type, param: null, code } });

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p: unknown) =>
      typeof p === "object" && p !== null && "text" in p && typeof p.text === "string" ? p.text : "",
    )
    .join(" ");
}

const wordsOf = (text: string): string[] => text.split(/\s+/).filter((w) => w.length > 0);

/** "Echo: " + the last user message, cut to max_tokens words; usage counted in words. */
function answerFor(body: ChatRequestBody, fixedPrompt: number | undefined): Answer {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const lastUser = [...messages].reverse().find((m) => m?.role === "user");
  const all = wordsOf(`Echo: ${textOf(lastUser?.content)}`);
  const limit = body.max_completion_tokens ?? body.max_tokens;
  const cut = typeof limit === "number" && limit >= 0 && limit < all.length;
  const promptWords = messages.reduce((n, m) => n + wordsOf(textOf(m?.content)).length, 0);
  return {
    words: cut ? all.slice(0, limit) : all,
    finish: cut ? "length" : "stop",
    promptTokens: fixedPrompt ?? promptWords + PROMPT_OVERHEAD_TOKENS,
  };
}

const usageOf = (a: Answer) => ({
  prompt_tokens: a.promptTokens,
  completion_tokens: a.words.length,
  total_tokens: a.promptTokens + a.words.length,
});

function lowerHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers))
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

function sendJson(res: ServerResponse, status: number, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

const write = (res: ServerResponse, data: string): Promise<void> =>
  new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.write(data, () => resolve());
  });

class FakeUpstreamServer implements FakeUpstream {
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
  private nextId = 0;
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
    this.answer(res, body, mode, live);
  }

  private answer(res: ServerResponse, body: ChatRequestBody, mode: FakeUpstreamMode, live: Live): void {
    if (mode === "stall-before-headers") return;
    if (mode === "status-400" || mode === "status-429" || mode === "status-500") {
      const status = mode === "status-400" ? 400 : mode === "status-429" ? 429 : 500;
      const e = ERRORS[status];
      sendJson(
        res,
        status,
        errorBody(
          `upstream ${status}: upstream secret detail sk-upstream-SECRET at http://internal-host:8000/v1 (node 10.20.30.40)`,
          e.type,
          e.code,
        ),
        status === 429 ? { "retry-after": "1" } : {},
      );
      return;
    }
    const answer = answerFor(body, this.promptTokens);
    const id = `chatcmpl-up${++this.nextId}`;
    const created = Math.floor(Date.now() / 1000);
    const model = typeof body.model === "string" ? body.model : FAKE_UPSTREAM_MODEL;
    if (body.stream === true)
      return void this.stream(
        res,
        live,
        { id, created, model },
        answer,
        mode,
        body.stream_options?.include_usage === true,
      );
    if (mode === "stall-mid-stream") return;
    if (mode === "die-mid-stream") {
      live.serverKilled = true;
      res.socket?.destroy();
      return;
    }
    const message = { role: "assistant", content: answer.words.join(" ") };
    const json = {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: answer.finish }],
    };
    sendJson(res, 200, JSON.stringify(mode === "no-usage" ? json : { ...json, usage: usageOf(answer) }));
  }

  private async stream(
    res: ServerResponse,
    live: Live,
    head: { id: string; created: number; model: string },
    answer: Answer,
    mode: FakeUpstreamMode,
    includeUsage: boolean,
  ): Promise<void> {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    res.flushHeaders();
    const chunk = (delta: Record<string, string>, finish: string | null) => ({
      ...head,
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    const frames: object[] = [chunk({ role: "assistant", content: "" }, null)];
    for (const [i, w] of answer.words.entries()) frames.push(chunk({ content: i === 0 ? w : ` ${w}` }, null));
    frames.push(chunk({}, answer.finish));
    if (includeUsage && mode !== "no-usage")
      frames.push({ ...head, object: "chat.completion.chunk", choices: [], usage: usageOf(answer) });
    const midStream = mode === "stall-mid-stream" || mode === "die-mid-stream";
    // Mid-stream faults strike before the finish chunk at the latest, however short the answer.
    const sent = midStream ? frames.slice(0, Math.min(MID_STREAM_CHUNKS, answer.words.length + 1)) : frames;
    for (const frame of sent) {
      if (res.destroyed) return;
      await write(res, `data: ${JSON.stringify(frame)}\n\n`);
      if (this.chunkDelayMs > 0) await sleep(this.chunkDelayMs);
    }
    if (mode === "die-mid-stream") {
      await sleep(20);
      live.serverKilled = true;
      res.socket?.destroy();
    }
    if (midStream || res.destroyed) return; // stall-mid-stream: open until the client or stop() ends it
    await write(res, "data: [DONE]\n\n");
    res.end();
  }
}

/** Starts a fake upstream on 127.0.0.1 (port 0 unless `options.port`). Call `close()` when done. */
export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const upstream = new FakeUpstreamServer(options);
  await upstream.start();
  return upstream;
}
