import type { EngineMessage } from "../engine.ts";
import { bm25Scores } from "./bm25.ts";
import { greedyOrder, mulberry32, sampledOrder, seedToUint32 } from "./sampling.ts";
import { splitSentences } from "./sentences.ts";

/** The answer when the conversation holds no text at all: short, fixed, and never empty. */
export const EMPTY_ANSWER = "I have nothing to work with yet.";

/** An answer of a few sentences reads as an answer, not as a copy of the conversation. */
const MAX_SENTENCES = 5;
/** Characters budget of the answer (about 300 tokens of English). */
const MAX_CHARS = 1200;
/** Only the best candidates are ever sampled from; it also bounds the sampling cost. */
const POOL = 32;
/** Lead summary of a single message: its opening sentences. */
const LEAD_SENTENCES = 3;

const WHITESPACE = /\s+/gu;

/** How the sentences are chosen; see {@link composeAnswer}. */
export interface AnswerOptions {
  /** 0 picks the best sentences; above 0 samples among the candidates. */
  temperature: number;
  topP: number;
  seed: bigint | undefined;
}

interface Passage {
  text: string;
  /** Index of the message it comes from. */
  message: number;
  /** Index of the sentence inside its message: the lead-summary prior. */
  position: number;
}

function lastUserIndex(messages: readonly EngineMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") return i;
  }
  return -1;
}

/** Sentences of every message but `skip`, in conversation order, repeated ones dropped. */
function collectPassages(messages: readonly EngineMessage[], skip: number): Passage[] {
  const seen = new Set<string>();
  const passages: Passage[] = [];
  messages.forEach((m, i) => {
    if (i === skip) return;
    splitSentences(m.content).forEach((text, position) => {
      if (seen.has(text)) return;
      seen.add(text);
      passages.push({ text, message: i, position });
    });
  });
  return passages;
}

/**
 * Builds the answer: the sentences of the conversation most relevant to the last user message,
 * in their original order.
 *
 * The question itself is not a source (answering a question with itself helps nobody), except
 * when it is the only text there is. When no sentence shares a term with the question, the
 * answer is a lead summary (the opening sentences of the messages), because an extractive
 * engine must still say something useful rather than nothing.
 */
export function composeAnswer(messages: readonly EngineMessage[], options: AnswerOptions): string {
  const q = lastUserIndex(messages);
  const question = messages[q];
  let passages = collectPassages(messages, q);
  if (passages.length === 0 && question !== undefined) passages = collectPassages([question], -1);
  if (passages.length === 0) return EMPTY_ANSWER;

  const relevance = bm25Scores(
    passages.map((p) => p.text),
    question?.content ?? "",
  );
  let scores: number[] = Array.from(relevance);
  let pool = scores.flatMap((s, i) => (s > 0 ? [i] : []));
  if (pool.length === 0) {
    // Lead summary: the first sentence of each message, or the opening ones of a lone message.
    const depth = new Set(passages.map((p) => p.message)).size > 1 ? 1 : LEAD_SENTENCES;
    scores = passages.map((p) => 1 / (1 + p.position));
    pool = passages.flatMap((p, i) => (p.position < depth ? [i] : []));
  }
  const ranked = greedyOrder(pool.map((i) => scores[i] ?? 0))
    .slice(0, POOL)
    .map((k) => pool[k] ?? 0);
  const rankedScores = ranked.map((i) => scores[i] ?? 0);
  const order =
    options.temperature > 0
      ? sampledOrder(rankedScores, options.temperature, options.topP, mulberry32(seedToUint32(options.seed)))
      : ranked.keys();

  const chosen: { index: number; text: string }[] = [];
  let chars = 0;
  for (const k of order) {
    const index = ranked[k] ?? 0;
    const text = (passages[index]?.text ?? "").replace(WHITESPACE, " ");
    if (chosen.length > 0 && chars + 1 + text.length > MAX_CHARS) continue;
    chosen.push({ index, text });
    chars += text.length + 1;
    if (chosen.length >= MAX_SENTENCES) break;
  }
  chosen.sort((a, b) => a.index - b.index);
  return chosen.map((c) => c.text).join(" ");
}
