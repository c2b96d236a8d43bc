/**
 * mulberry32: a tiny, fast 32-bit PRNG. Statistical quality is more than enough to pick a few
 * sentences, and unlike `Math.random` it can be seeded, which is what makes `seed` reproducible.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Folds the request's 64-bit `seed` (any sign) into the 32 bits mulberry32 takes. Without a
 * seed the draw is random, as OpenAI's sampling is: only an explicit seed promises a repeat.
 */
export function seedToUint32(seed: bigint | undefined): number {
  if (seed === undefined) return Math.floor(Math.random() * 4294967296) >>> 0;
  const s = BigInt.asUintN(64, seed);
  return Number((s ^ (s >> 32n)) & 0xffffffffn);
}

/**
 * Logit of the best candidate before temperature. Scores are normalised to the best one so a
 * temperature means the same thing whatever the scale of BM25 on this conversation: at
 * temperature 1 the best sentence is e^5 ≈ 150 times likelier than one scoring nearly nothing.
 */
const LOGIT_SCALE = 5;

/** Candidate indices from best to worst score; ties go to the earlier sentence. */
export function greedyOrder(scores: readonly number[]): number[] {
  return scores.map((_, i) => i).sort((a, b) => (scores[b] ?? 0) - (scores[a] ?? 0) || a - b);
}

/**
 * Candidate indices in a sampled order: each pick is drawn without replacement from
 * softmax(score / temperature), restricted to the smallest set of candidates whose probability
 * reaches `topP` (nucleus sampling), as OpenAI's `temperature` and `top_p` do for tokens.
 * Lazy, so the caller draws only as many as it keeps.
 */
export function* sampledOrder(
  scores: readonly number[],
  temperature: number,
  topP: number,
  random: () => number,
): Generator<number> {
  const best = Math.max(...scores, 0) || 1;
  const logits = scores.map((s) => ((s / best) * LOGIT_SCALE) / temperature);
  const remaining = scores.map((_, i) => i);
  while (remaining.length > 0) {
    const top = Math.max(...remaining.map((i) => logits[i] ?? 0));
    const weights = remaining.map((i) => ({ i, w: Math.exp((logits[i] ?? 0) - top) }));
    const total = weights.reduce((sum, x) => sum + x.w, 0);
    weights.sort((a, b) => b.w - a.w || a.i - b.i);
    const nucleus: typeof weights = [];
    let mass = 0;
    for (const x of weights) {
      nucleus.push(x);
      mass += x.w;
      if (mass >= topP * total) break;
    }
    let r = random() * mass;
    let pick = nucleus[nucleus.length - 1]?.i ?? 0;
    for (const x of nucleus) {
      r -= x.w;
      if (r < 0) {
        pick = x.i;
        break;
      }
    }
    remaining.splice(remaining.indexOf(pick), 1);
    yield pick;
  }
}
