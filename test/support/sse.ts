import { tryJson } from "./http.ts";

/** One SSE frame as it was on the wire. */
export interface SseFrame {
  /** The raw frame text, without its terminating blank line. */
  raw: string;
  /** `event:` field, if any. */
  event: string | undefined;
  /** `data:` field (single line), if any. */
  data: string | undefined;
  /** Whether the frame is a comment line only (such as `: keep-alive`). */
  comment: boolean;
}

/**
 * Splits a complete SSE body into frames. Throws if the body does not end with a blank line,
 * so a truncated frame can never pass unnoticed.
 */
export function parseSse(body: string): SseFrame[] {
  if (body.length === 0) return [];
  if (!body.endsWith("\n\n"))
    throw new Error(`SSE body does not end with a blank line: ${JSON.stringify(body.slice(-80))}`);
  return body
    .slice(0, -2)
    .split("\n\n")
    .map((raw) => {
      const lines = raw.split("\n");
      let event: string | undefined;
      let data: string | undefined;
      let comment = true;
      for (const line of lines) {
        if (line.startsWith(":")) continue;
        comment = false;
        if (line.startsWith("event: ")) event = line.slice("event: ".length);
        else if (line.startsWith("data: ")) data = line.slice("data: ".length);
        else throw new Error(`unexpected SSE line: ${JSON.stringify(line)}`);
      }
      return { raw, event, data, comment };
    });
}

/** A `chat.completion.chunk` as sent by the edge. */
export interface ChunkJson {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Array<{ index: number; delta: { role?: string; content?: string }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** The JSON of every data frame that is not `[DONE]`. */
export function dataJson(frames: SseFrame[]): unknown[] {
  return frames.filter((f) => f.data !== undefined && f.data !== "[DONE]").map((f) => tryJson(f.data ?? ""));
}

/** The chunks of a stream, typed after a shape check of each. */
export function chunksOf(frames: SseFrame[]): ChunkJson[] {
  return frames
    .filter((f) => f.event === undefined && f.data !== undefined && f.data !== "[DONE]")
    .map((f) => {
      const value = tryJson(f.data ?? "");
      if (
        typeof value !== "object" ||
        value === null ||
        (value as { object?: unknown }).object !== "chat.completion.chunk"
      ) {
        throw new Error(`not a chunk: ${f.data}`);
      }
      return value as ChunkJson;
    });
}

/** Concatenated content of all content chunks. */
export function streamedText(chunks: ChunkJson[]): string {
  return chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
}
