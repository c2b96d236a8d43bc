/**
 * Reads a chat SSE stream piece by piece and keeps what the client has been told so far. The
 * soak leaves at chosen points inside a stream, so it must know, at every byte, whether it
 * has seen a chunk, the finish, the usage chunk, an error event or `[DONE]`.
 */
export interface SseState {
  /** The completion id, from the first chunk that carried one. */
  id: string | undefined;
  /** Chunks with a non-empty `choices` array. */
  contentChunks: number;
  /** A chunk carried a `finish_reason`. */
  finished: boolean;
  /** The usage chunk (empty `choices`, `usage`) arrived. */
  usage: boolean;
  /** `event: error` with `spend_cap_exceeded`. */
  spendCapAbort: boolean;
  /** `data: {"error":"service_unavailable","status":500}`. */
  internalError: boolean;
  /** `data: [DONE]`. */
  done: boolean;
  /** Something that is not the contract (unparsable data, an unknown error event). */
  oddity: string | undefined;
}

interface ChunkLike {
  id?: unknown;
  choices?: unknown;
  usage?: unknown;
  error?: unknown;
  status?: unknown;
  code?: unknown;
}

/** An incremental scanner: feed it text as it arrives; `state` is always up to date. */
export class SseScanner {
  readonly state: SseState = {
    id: undefined,
    contentChunks: 0,
    finished: false,
    usage: false,
    spendCapAbort: false,
    internalError: false,
    done: false,
    oddity: undefined,
  };
  private buffer = "";

  /** Adds received text; returns how many frames it completed. */
  feed(text: string): number {
    this.buffer += text.replaceAll("\r\n", "\n");
    let frames = 0;
    for (let end = this.buffer.indexOf("\n\n"); end >= 0; end = this.buffer.indexOf("\n\n")) {
      const frame = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      this.frame(frame);
      frames += 1;
    }
    return frames;
  }

  private frame(frame: string): void {
    let event: string | undefined;
    const data: string[] = [];
    for (const line of frame.split("\n")) {
      if (line.startsWith(":")) continue; // keep-alive comment
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length === 0) return;
    const payload = data.join("\n");
    const s = this.state;
    if (payload === "[DONE]") {
      s.done = true;
      return;
    }
    let json: ChunkLike;
    try {
      json = JSON.parse(payload) as ChunkLike;
    } catch {
      s.oddity ??= `unparsable data: ${payload.slice(0, 120)}`;
      return;
    }
    if (event === "error") {
      if (json.code === "spend_cap_exceeded") s.spendCapAbort = true;
      else s.oddity ??= `error event: ${payload.slice(0, 160)}`;
      return;
    }
    if (event !== undefined) {
      s.oddity ??= `unknown event ${event}`;
      return;
    }
    if (json.error !== undefined) {
      if (json.error === "service_unavailable" && json.status === 500) s.internalError = true;
      else s.oddity ??= `error data: ${payload.slice(0, 160)}`;
      return;
    }
    if (typeof json.id === "string") {
      if (s.id === undefined) s.id = json.id;
      else if (s.id !== json.id) s.oddity ??= `chunk ids differ: ${s.id} then ${json.id}`;
    }
    if (Array.isArray(json.choices) && json.choices.length > 0) {
      s.contentChunks += 1;
      const choices = json.choices as Array<{ finish_reason?: unknown }>;
      if (choices.some((c) => typeof c?.finish_reason === "string")) s.finished = true;
    } else if (json.usage !== undefined) {
      s.usage = true;
    }
  }
}
