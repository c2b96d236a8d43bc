/**
 * Where a sentence may end: Western terminators followed by whitespace or the end of the text
 * (so "3.14" and "e.g.x" do not split), CJK terminators anywhere (CJK text has no spaces), and
 * line breaks (lists, headings and code lines are passages of their own).
 */
const BOUNDARY = /[.!?…]+["'”’)\]]*(?=\s|$)|[。！？]+["'”’」』)\]]*|\n+/gu;

/** A passage worth scoring has at least one letter or digit. */
const HAS_WORD = /[\p{L}\p{N}]/u;

/** Trailing letters just before a period, used to recognise "Dr." or "J." as non-endings. */
const WORD_BEFORE = /(\p{L}+)$/u;

/**
 * Titles and a few common abbreviations whose period rarely ends a sentence. Single letters
 * ("J. Smith", "U.S.") are handled separately. "etc." is left out on purpose: it usually does
 * end a sentence.
 */
const ABBREVIATIONS: ReadonlySet<string> = new Set([
  "mr",
  "mrs",
  "ms",
  "dr",
  "prof",
  "sr",
  "jr",
  "st",
  "vs",
  "inc",
  "ltd",
  "co",
  "no",
  "fig",
  "approx",
  "dept",
  "est",
  "vol",
]);

/**
 * Longest passage kept whole. A wall of text with no punctuation (logs, minified code) would
 * otherwise be one "sentence" that drowns the answer, so it is cut at whitespace instead.
 */
export const MAX_PASSAGE_CHARS = 600;

function isAbbreviation(text: string, periodAt: number): boolean {
  const before = WORD_BEFORE.exec(text.slice(Math.max(0, periodAt - 12), periodAt));
  const word = before?.[1];
  if (word === undefined) return false;
  return word.length === 1 || ABBREVIATIONS.has(word.toLowerCase());
}

/** Cuts an over-long passage at whitespace into pieces of at most `MAX_PASSAGE_CHARS`. */
function chunk(passage: string, out: string[]): void {
  let rest = passage;
  while (rest.length > MAX_PASSAGE_CHARS) {
    let cut = rest.lastIndexOf(" ", MAX_PASSAGE_CHARS);
    if (cut <= 0) cut = MAX_PASSAGE_CHARS;
    const head = rest.slice(0, cut).trim();
    if (head.length > 0) out.push(head);
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0) out.push(rest);
}

function push(raw: string, out: string[]): void {
  const passage = raw.trim();
  if (passage.length === 0 || !HAS_WORD.test(passage)) return;
  if (passage.length > MAX_PASSAGE_CHARS) chunk(passage, out);
  else out.push(passage);
}

/**
 * Splits text into trimmed sentences (or passages, for long unpunctuated runs).
 *
 * A regex heuristic rather than a language model: the engine must answer a 32K-token
 * conversation in milliseconds, and a sentence that is occasionally split at "Plan B." costs
 * far less than a slow answer.
 */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(BOUNDARY)) {
    if (m[0].startsWith(".") && isAbbreviation(text, m.index)) continue;
    const end = m.index + m[0].length;
    push(text.slice(start, end), out);
    start = end;
  }
  push(text.slice(start), out);
  return out;
}
