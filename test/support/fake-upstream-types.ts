// The public face of the fake upstream (test/support/fake-upstream.ts): its modes, what it records and
// its settings. Importers take them from fake-upstream.ts, which re-exports them.

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

/** One request as the fake upstream saw it, for tests to assert on. */
export interface RecordedRequest {
  method: string;
  path: string; // without the query string, e.g. "/v1/chat/completions"
  headers: Record<string, string>; // lowercased names; repeated headers joined with ", "
  body: ChatRequestBody | null; // the parsed body if it was a JSON object (null while being read)
  aborted: boolean; // the client closed the connection before the response was finished
  finished: boolean; // the response was completely written
  mode: FakeUpstreamMode | null; // the mode a chat request was answered in; else null
}

/** The settings a fake upstream starts with (and returns to on `reset()`). */
export interface FakeUpstreamOptions {
  port?: number; // default 0: any free port
  mode?: FakeUpstreamMode; // default "ok"
  behave?: Behave; // when set, overrides `mode` for each chat request
  apiKey?: string; // when set, requests without `authorization: Bearer <apiKey>` get 401
  chunkDelayMs?: number; // pause after every stream chunk, default 0
  promptTokens?: number; // fixed prompt_tokens; default: words of all messages + PROMPT_OVERHEAD_TOKENS
}

/** A running fake upstream: its address, its live settings and what it recorded. */
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
