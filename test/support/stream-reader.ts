import { tryJson } from "./http.ts";

/** How a live response body ended: normally, or with the error that cut it. */
export interface StreamEnd {
  text: string;
  error: Error | undefined;
}

/**
 * Reads a response body as it arrives, so a test can act in the middle of a stream (kill
 * Redis, kill a process) and then keep reading.
 */
export interface StreamReader {
  /** Everything received so far. */
  text(): string;
  /** Resolves once `test(text)` holds; rejects after `timeoutMs`, or if the body ends first. */
  until(test: (text: string) => boolean, timeoutMs: number): Promise<void>;
  /** Resolves when the body ends, cleanly or not; never rejects. */
  end: Promise<StreamEnd>;
}

export function readStream(body: ReadableStream<Uint8Array>): StreamReader {
  let text = "";
  let ended: StreamEnd | undefined;
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  const decoder = new TextDecoder();
  const reader = body.getReader();

  const end = (async (): Promise<StreamEnd> => {
    let error: Error | undefined;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        notify();
      }
      text += decoder.decode();
    } catch (err) {
      error = err instanceof Error ? err : new Error(String(err));
    }
    ended = { text, error };
    notify();
    return ended;
  })();

  return {
    text: () => text,
    end,
    until(test, timeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (test(text)) return finish();
          if (ended)
            return finish(new Error(`the stream ended first (${ended.error?.message ?? "cleanly"}); got:\n${text}`));
        };
        const timer = setTimeout(() => finish(new Error(`not seen within ${timeoutMs} ms; got:\n${text}`)), timeoutMs);
        function finish(err?: Error) {
          clearTimeout(timer);
          waiters.delete(check);
          if (err) reject(err);
          else resolve();
        }
        waiters.add(check);
        check();
      });
    },
  };
}

/** The content deltas among the complete SSE frames of `text` (a partial last frame is ignored). */
export function contentDeltas(text: string): string[] {
  const complete = text.slice(0, text.lastIndexOf("\n\n") + 1);
  const out: string[] = [];
  for (const frame of complete.split("\n\n")) {
    const data = frame
      .split("\n")
      .find((l) => l.startsWith("data: "))
      ?.slice("data: ".length);
    if (data === undefined || data === "[DONE]") continue;
    const value = tryJson(data) as { choices?: Array<{ delta?: { content?: unknown } }> } | undefined;
    const content = value?.choices?.[0]?.delta?.content;
    if (typeof content === "string" && content.length > 0) out.push(content);
  }
  return out;
}
