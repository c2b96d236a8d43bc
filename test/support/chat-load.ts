import { chunksOf, parseSse, type ChunkJson } from "./sse.ts";
import { tryJson } from "./http.ts";

/** Token usage as the edge reports it. */
export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/**
 * What one chat call ended as, classified so a load test can account for every call:
 * completed (JSON or a stream with usage and `[DONE]`), cut by the spend-cap abort event,
 * refused with 402 `spend_cap_exceeded`, or anything else (which a billing test must not see).
 */
export type ChatOutcome =
  | { kind: "json"; id: string; usage: WireUsage }
  | { kind: "sse-done"; id: string; usage: WireUsage; contentChunks: number }
  | { kind: "sse-abort"; id: string | undefined; contentChunks: number }
  | { kind: "refused"; retryAfter: number }
  | { kind: "other"; status: number; detail: string };

/** The body of one test call: a small prompt and, optionally, `max_tokens`. */
export function chatBody(i: number, stream: boolean, maxTokens: number | undefined): Record<string, unknown> {
  return {
    messages: [
      {
        role: "system",
        content: `Note ${i}: rivers carry water to the sea. Mountains are tall. Deserts are dry and hot in summer.`,
      },
      { role: "user", content: `Question ${i}: where do rivers carry water, and what are deserts like?` },
    ],
    ...(stream && { stream: true }),
    ...(maxTokens !== undefined && { max_tokens: maxTokens }),
  };
}

const isUsage = (u: unknown): u is WireUsage =>
  typeof u === "object" &&
  u !== null &&
  typeof (u as WireUsage).prompt_tokens === "number" &&
  typeof (u as WireUsage).completion_tokens === "number";

/** Classifies a whole SSE body. */
function classifySse(text: string): ChatOutcome {
  let frames: ReturnType<typeof parseSse>;
  try {
    frames = parseSse(text);
  } catch (err) {
    return { kind: "other", status: 200, detail: `bad SSE: ${String(err)}` };
  }
  const last = frames.at(-1);
  const errorFrame = frames.find((f) => f.event === "error");
  let chunks: ChunkJson[];
  try {
    chunks = chunksOf(frames.filter((f) => f.event === undefined));
  } catch (err) {
    return { kind: "other", status: 200, detail: `bad chunk: ${String(err)} in ${text.slice(0, 300)}` };
  }
  const content = chunks.filter((c) => c.choices.length > 0).length;
  if (errorFrame) {
    const code = (tryJson(errorFrame.data ?? "") as { code?: unknown } | undefined)?.code;
    if (code !== "spend_cap_exceeded" || last !== errorFrame)
      return { kind: "other", status: 200, detail: `error event: ${text.slice(-300)}` };
    return { kind: "sse-abort", id: chunks[0]?.id, contentChunks: content };
  }
  const usageChunk = chunks.at(-1);
  if (last?.data !== "[DONE]" || !usageChunk || usageChunk.choices.length !== 0 || !isUsage(usageChunk.usage)) {
    return { kind: "other", status: 200, detail: `stream without usage and [DONE]: ${text.slice(-300)}` };
  }
  if (chunks.some((c) => c.id !== usageChunk.id))
    return { kind: "other", status: 200, detail: "chunk ids differ within one stream" };
  return { kind: "sse-done", id: usageChunk.id, usage: usageChunk.usage, contentChunks: content };
}

/** Makes one chat call with `fetch` and reads the whole body; never throws. */
export async function chatOnce(edgeUrl: string, apiKey: string, body: Record<string, unknown>): Promise<ChatOutcome> {
  try {
    const res = await fetch(`${edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status === 402) {
      const code = (tryJson(text) as { error?: { code?: unknown } } | undefined)?.error?.code;
      if (code === "spend_cap_exceeded") return { kind: "refused", retryAfter: Number(res.headers.get("retry-after")) };
      return { kind: "other", status: 402, detail: text.slice(0, 300) };
    }
    if (res.status !== 200) return { kind: "other", status: res.status, detail: text.slice(0, 300) };
    if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) return classifySse(text);
    const json = tryJson(text) as { id?: unknown; usage?: unknown } | undefined;
    if (typeof json?.id !== "string" || !isUsage(json.usage))
      return { kind: "other", status: 200, detail: `bad JSON: ${text.slice(0, 300)}` };
    return { kind: "json", id: json.id, usage: json.usage };
  } catch (err) {
    return { kind: "other", status: 0, detail: `fetch failed: ${String(err)}` };
  }
}

/** Runs `task(0..count-1)` with at most `limit` in flight; results keep their index. */
export async function pool<T>(count: number, limit: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      out[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
  return out;
}
