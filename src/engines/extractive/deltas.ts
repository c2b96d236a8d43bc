import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Tokenizer } from "../tokenizer.ts";

/** A piece of the answer as streamed: its text and how many output tokens it holds. */
export interface Piece {
  text: string;
  tokens: number;
}

/** What to stream and why it ends. */
export interface Plan {
  pieces: Piece[];
  finishReason: FinishReason;
}

function decodeOneByOne(tokenizer: Tokenizer, tokens: readonly number[]): Piece[] {
  const pieces: Piece[] = [];
  let pending = 0;
  for (const token of tokens) {
    pending++;
    const text = tokenizer.decode([token]);
    if (text.length === 0) continue;
    pieces.push({ text, tokens: pending });
    pending = 0;
  }
  const last = pieces[pieces.length - 1];
  if (pending > 0 && last !== undefined) last.tokens += pending;
  return pieces;
}

/**
 * Splits `text` into token-sized pieces whose texts concatenate to exactly `text` and whose
 * token counts add up to `tokenizer.encode(text).length`.
 *
 * A character split across tokens (emoji, many CJK characters) is emitted once complete, with
 * the count of every token it took. Tokens are decoded one at a time, never as a growing group:
 * gpt-tokenizer decodes bytes through one module-wide streaming `TextDecoder`, so a call that
 * ends inside a character returns "" and keeps the dangling bytes for the next call, whoever
 * makes it. Decoding each token exactly once, all in one synchronous pass over a valid text,
 * consumes those bytes at the next token and leaves the decoder clean before anyone else runs.
 * Should the decoder hold bytes left by someone else, the result no longer matches `text`; the
 * pass is then repeated (the first one flushed them), and as a last resort the text goes out as
 * a single piece, which is still correct, only coarser.
 */
export function tokenPieces(tokenizer: Tokenizer, text: string): Piece[] {
  if (text.length === 0) return [];
  const tokens = tokenizer.encode(text);
  for (let attempt = 0; attempt < 2; attempt++) {
    const pieces = decodeOneByOne(tokenizer, tokens);
    if (pieces.map((p) => p.text).join("") === text) return pieces;
  }
  return [{ text, tokens: tokens.length }];
}

/** Index of the first occurrence of any (non-empty) stop string, or -1. */
function firstStop(text: string, stop: readonly string[]): number {
  let cut = -1;
  for (const s of stop) {
    if (s.length === 0) continue;
    const at = text.indexOf(s);
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  return cut;
}

/**
 * Decides what of `answer` is streamed and the finish reason.
 *
 * The answer is first cut before the earliest stop string; if what is left fits in `maxTokens`
 * the stop (or the natural end) came first and the reason is STOP, otherwise the token limit
 * came first and the reason is LENGTH. The cut text is tokenized as a whole, as the core counts
 * it. A character whose tokens straddle the limit is left out, so a LENGTH answer may hold a
 * token or two fewer than `maxTokens` rather than end in a broken character.
 */
export function planOutput(tokenizer: Tokenizer, answer: string, stop: readonly string[], maxTokens: number): Plan {
  const cut = firstStop(answer, stop);
  const pieces = tokenPieces(tokenizer, cut >= 0 ? answer.slice(0, cut) : answer);
  const total = pieces.reduce((sum, p) => sum + p.tokens, 0);
  if (total <= maxTokens) return { pieces, finishReason: FinishReason.STOP };
  const kept: Piece[] = [];
  let used = 0;
  for (const p of pieces) {
    if (used + p.tokens > maxTokens) break;
    kept.push(p);
    used += p.tokens;
  }
  return { pieces: kept, finishReason: FinishReason.LENGTH };
}
