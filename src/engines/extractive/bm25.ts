/**
 * A term is one Han/Kana character (those scripts do not separate words with spaces, so single
 * characters are the simplest unit that still matches), or a run of other letters and digits.
 */
const WORD = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]|[[\p{L}\p{N}]--[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]]+/gv;

const ASCII_LETTER = /^[a-z]$/;

/** Words so common that matching them says nothing about relevance. */
const STOPWORDS: ReadonlySet<string> = new Set(
  (
    "a about above after again against all am an and any are as at be because been before being " +
    "below between both but by can could did do does doing down during each few for from " +
    "further had has have having he her here hers herself him himself his how i if in into is it " +
    "its itself just me more most my myself no nor not now of off on once only or other our ours " +
    "ourselves out over own same she should so some such than that the their theirs them " +
    "themselves then there these they this those through to too under until up very was we were " +
    "what when where which while who whom why will with would you your yours yourself " +
    "yourselves tell please know think also like get got us let"
  ).split(" "),
);

/**
 * Folds the most common English plurals ("batteries" → "battery", "cats" → "cat") so a question
 * and its answer need not agree on number. Applied to query and passages alike, so an imperfect
 * fold ("this" would become "thi") still matches itself.
 */
function fold(word: string): string {
  if (word.length > 4 && word.endsWith("ies")) return `${word.slice(0, -3)}y`;
  if (word.length > 3 && word.endsWith("s") && !word.endsWith("ss") && !word.endsWith("us")) {
    return word.slice(0, -1);
  }
  return word;
}

/** Lowercased, stopword-free, plural-folded terms of `text`, in order. */
export function terms(text: string): string[] {
  const words = text.toLowerCase().match(WORD);
  const out: string[] = [];
  if (words === null) return out;
  for (const w of words) {
    if (STOPWORDS.has(w) || ASCII_LETTER.test(w)) continue;
    out.push(fold(w));
  }
  return out;
}

const K1 = 1.2;
const B = 0.75;

/**
 * BM25 score of every document against the query (0 for a document sharing no term with it).
 *
 * BM25 rather than raw overlap because it discounts words that appear everywhere in the
 * conversation and long passages that match by sheer size. Only the query's own terms are
 * counted per document, so the cost is one pass over the words of the conversation.
 */
export function bm25Scores(docs: readonly string[], query: string): Float64Array {
  const scores = new Float64Array(docs.length);
  const queryTerms = [...new Set(terms(query))];
  if (queryTerms.length === 0 || docs.length === 0) return scores;

  const index = new Map<string, number>();
  for (const [i, t] of queryTerms.entries()) index.set(t, i);
  const df = new Float64Array(queryTerms.length);
  const scratch = new Float64Array(queryTerms.length);
  const lengths = new Float64Array(docs.length);
  /** Per document: flattened [queryTermIndex, termFrequency, ...] pairs. */
  const hits: number[][] = [];
  const touched: number[] = [];
  let totalLength = 0;

  docs.forEach((doc, d) => {
    const ts = terms(doc);
    lengths[d] = ts.length;
    totalLength += ts.length;
    for (const t of ts) {
      const q = index.get(t);
      if (q === undefined) continue;
      if (scratch[q] === 0) touched.push(q);
      scratch[q] = (scratch[q] ?? 0) + 1;
    }
    const h: number[] = [];
    for (const q of touched) {
      h.push(q, scratch[q] ?? 0);
      df[q] = (df[q] ?? 0) + 1;
      scratch[q] = 0;
    }
    touched.length = 0;
    hits.push(h);
  });

  const n = docs.length;
  const avgLength = totalLength / n || 1;
  const idf = df.map((f) => Math.log(1 + (n - f + 0.5) / (f + 0.5)));
  hits.forEach((h, d) => {
    const norm = K1 * (1 - B + (B * (lengths[d] ?? 0)) / avgLength);
    let score = 0;
    for (let i = 0; i < h.length; i += 2) {
      const tf = h[i + 1] ?? 0;
      score += ((idf[h[i] ?? 0] ?? 0) * tf * (K1 + 1)) / (tf + norm);
    }
    scores[d] = score;
  });
  return scores;
}
