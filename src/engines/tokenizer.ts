import { countTokens, decode, encode, isWithinTokenLimit } from "gpt-tokenizer/encoding/o200k_base";
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
   * Tokens of a whole conversation, including the per-message framing overhead, or
   * `undefined` as soon as it is known to exceed `limit`. Stopping early keeps a 32 MiB body
   * from costing a full tokenization before it is refused.
   */
  countMessages(messages: readonly EngineMessage[], limit: number): number | undefined;
}

/** Framing tokens per message (role and separators) and per reply, as OpenAI counts them. */
const PER_MESSAGE = 3;
const PER_REPLY = 3;

/** Builds the o200k_base tokenizer used by `service-extract` and for local counting. */
export function createTokenizer(): Tokenizer {
  return {
    encode: (text) => encode(text, PLAIN),
    decode: (tokens) => decode(tokens),
    count: (text) => countTokens(text, PLAIN),
    countMessages(messages, limit) {
      let total = PER_REPLY;
      for (const m of messages) {
        total += PER_MESSAGE;
        if (m.name !== undefined) total += 1;
        const budget = limit - total;
        if (budget < 0) return undefined;
        const n = isWithinTokenLimit(m.content, budget, PLAIN);
        if (n === false) return undefined;
        total += n;
      }
      return total <= limit ? total : undefined;
    },
  };
}
