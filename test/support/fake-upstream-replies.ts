import type { ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import {
  FAKE_UPSTREAM_MODEL,
  MID_STREAM_CHUNKS,
  PROMPT_OVERHEAD_TOKENS,
  type ChatRequestBody,
  type FakeUpstreamMode,
} from "./fake-upstream-types.ts";

// How the fake upstream answers a chat request in each mode: the OpenAI-shaped bodies, streams
// and errors, kept apart from the server that records requests and routes them here.

interface Answer {
  words: string[];
  finish: "stop" | "length";
  promptTokens: number;
}

/** A response in progress; `serverKilled` marks one the server cut itself (not a client abort). */
export interface Live {
  res: ServerResponse;
  serverKilled: boolean;
}

/**
 * The server's settings a reply reads (`chunkDelayMs` at each chunk, so a test may change it
 * mid-stream), and where its completion ids come from.
 */
export interface ReplySettings {
  readonly promptTokens: number | undefined;
  readonly chunkDelayMs: number;
  nextId(): string;
}

const ERRORS: Record<400 | 429 | 500, { type: string; code: string }> = {
  400: { type: "invalid_request_error", code: "invalid_value" },
  429: { type: "requests", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: "internal_error" },
};

/** An OpenAI error body, the shape every upstream error of the fake takes. */
export const errorBody = (message: string, type: string, code: string): string =>
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

/** Writes a whole JSON response with its length, for the fake's non-streaming answers. */
export function sendJson(res: ServerResponse, status: number, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...extra });
  res.end(body);
}

const write = (res: ServerResponse, data: string): Promise<void> =>
  new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.write(data, () => resolve());
  });

/** Answers one chat request in `mode`: an error status, a stall, a cut, or the echo answer (whole or streamed). */
export function replyToChat(
  res: ServerResponse,
  body: ChatRequestBody,
  mode: FakeUpstreamMode,
  live: Live,
  settings: ReplySettings,
): void {
  if (mode === "stall-before-headers") return;
  if (mode === "status-400" || mode === "status-429" || mode === "status-500") {
    const status = mode === "status-400" ? 400 : mode === "status-429" ? 429 : 500;
    const e = ERRORS[status];
    sendJson(
      res,
      status,
      errorBody(
        `upstream ${status}: upstream secret detail sk-upstream-SECRET ` +
          "at http://internal-host:8000/v1 (node 10.20.30.40)",
        e.type,
        e.code,
      ),
      status === 429 ? { "retry-after": "1" } : {},
    );
    return;
  }
  const answer = answerFor(body, settings.promptTokens);
  const id = settings.nextId();
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === "string" ? body.model : FAKE_UPSTREAM_MODEL;
  if (body.stream === true)
    return void streamAnswer(
      res,
      live,
      { id, created, model },
      answer,
      mode,
      body.stream_options?.include_usage === true,
      settings,
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

async function streamAnswer(
  res: ServerResponse,
  live: Live,
  head: { id: string; created: number; model: string },
  answer: Answer,
  mode: FakeUpstreamMode,
  includeUsage: boolean,
  settings: ReplySettings,
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
    if (settings.chunkDelayMs > 0) await sleep(settings.chunkDelayMs);
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
