import { decode, encode, isWithinTokenLimit } from "gpt-tokenizer/encoding/o200k_base";
import type { EngineMessage } from "./engine.ts";

/**
 * User text is data: a literal "<|endoftext|>" in it is counted as plain text, never as a
 * special token (the library's default would throw on it).
 */
const PLAIN = { allowedSpecial: new Set<string>(), disallowedSpecial: new Set<string>() };

/**
 * o200k_base token arithmetic, shared by the core (limits and billing) and the engines
 * (token-sized deltas), so that what is counted and what is streamed agree.
 */
export interface Tokenizer {
  encode(text: string): number[];
  decode(tokens: number[]): string;
  count(text: string): number;
  /**
   * Tokens of a whole conversation: every message's content, `name` and `tool_call_id`, the
   * per-message framing overhead, and any `extra` texts sent with it (tool definitions, tool
   * calls), or `undefined` as soon as it is known to exceed `limit`. Stopping early keeps a
   * 32 MiB body from costing a full tokenization before it is refused.
   */
  countMessages(messages: readonly EngineMessage[], limit: number, extra?: readonly string[]): number | undefined;
}

/**
 * The longest run of one character class (spaces, or everything else) counted as one piece.
 * BPE merging is quadratic in the length of a pre-token, and an unbroken 100 KB "word" or a
 * 100 KB run of spaces is one pre-token that would take seconds; cutting such runs costs at
 * most one extra token per cut, only on inputs no language produces.
 */
const MAX_RUN = 256;

const isSpace = (code: number) => code === 32 || (code >= 9 && code <= 13) || code === 160 || code === 0x3000;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** The text in pieces with no same-class run longer than MAX_RUN, lazily, for early exit. */
function* pieces(text: string): Generator<string> {
  let start = 0;
  let run = 0;
  let spaces = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const space = isSpace(code);
    if (space !== spaces) {
      spaces = space;
      run = 0;
    }
    run += 1;
    // Never cut between the halves of a surrogate pair.
    if (run > MAX_RUN && !isLowSurrogate(code)) {
      yield text.slice(start, i);
      start = i;
      run = 1;
    }
  }
  if (start < text.length) yield text.slice(start);
}

/** Tokens of `text`, or undefined once they exceed `budget`. */
function countWithin(text: string, budget: number): number | undefined {
  let total = 0;
  for (const piece of pieces(text)) {
    const n = isWithinTokenLimit(piece, budget - total, PLAIN);
    if (n === false) return undefined;
    total += n;
  }
  return total;
}

/** Framing tokens per message (role and separators) and per reply, as OpenAI counts them. */
const PER_MESSAGE = 3;
const PER_REPLY = 3;

/** One more framing token for a message that carries a `name`, as OpenAI counts it. */
const PER_NAME = 1;

/**
 * Every text of a conversation the model sees: each message's content, `name` and
 * `tool_call_id` (all forwarded upstream, so all billed as input), then the extras. Lazy, so
 * an early exit against the limit never walks or copies the rest of a huge body.
 */
function* inputTexts(messages: readonly EngineMessage[], extra: readonly string[]): Generator<string> {
  for (const m of messages) {
    yield m.content;
    if (m.name !== undefined) yield m.name;
    if (m.toolCallId !== undefined) yield m.toolCallId;
  }
  yield* extra;
}

/**
 * The longest text whose count is remembered: a streamed delta is a token or a few. Kept under
 * V8's 13-character minimum for a sliced string, so a key is always its own copy and never
 * keeps alive the (perhaps 32 MiB) string it was cut from.
 */
const MEMO_MAX_LENGTH = 12;
/** Counts remembered at most; the memo is emptied when full, so it stays under a megabyte. */
const MEMO_MAX_ENTRIES = 8192;

/** Builds the o200k_base tokenizer used by `service-extract` and for local counting. */
export function createTokenizer(): Tokenizer {
  // Engines count every streamed delta (for mid-call reservations), and deltas are short and
  // repeat a lot: the BPE work per delta showed in profiles of the chat path. A count depends
  // only on the text, so remembering short texts' counts changes no result.
  const memo = new Map<string, number>();
  const count = (text: string): number => {
    if (text.length > MEMO_MAX_LENGTH) return countWithin(text, Number.POSITIVE_INFINITY) ?? 0;
    let n = memo.get(text);
    if (n === undefined) {
      n = countWithin(text, Number.POSITIVE_INFINITY) ?? 0;
      if (memo.size >= MEMO_MAX_ENTRIES) memo.clear();
      memo.set(text, n);
    }
    return n;
  };
  return {
    encode: (text) => encode(text, PLAIN),
    decode: (tokens) => decode(tokens),
    count,
    countMessages(messages, limit, extra = []) {
      let total = PER_REPLY;
      for (const m of messages) total += PER_MESSAGE + (m.name !== undefined ? PER_NAME : 0);
      for (const text of inputTexts(messages, extra)) {
        if (total > limit) return undefined;
        const n = countWithin(text, limit - total);
        if (n === undefined) return undefined;
        total += n;
      }
      return total <= limit ? total : undefined;
    },
  };
}
