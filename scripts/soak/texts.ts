import type { Rng } from "./rng.ts";

const WORDS = (
  "river water sea mountain desert summer winter cloud rain snow valley forest meter budget " +
  "cap spend token stream chunk gateway account key limit reserve settle refund ledger record usage period " +
  "month price model engine upstream redis process signal freeze restart client reader backpressure " +
  "cancel abort partial charge invoice payment status trace request response header body event"
).split(" ");

/** A sentence of 6 to 18 words, capitalised and ended with a full stop. */
function sentence(rng: Rng): string {
  const words = Array.from({ length: rng.int(6, 18) }, () => rng.pick(WORDS));
  const first = words[0] ?? "note";
  words[0] = first.charAt(0).toUpperCase() + first.slice(1);
  return `${words.join(" ")}.`;
}

/**
 * Text of roughly `words` words in sentences: the extractive model answers with whole
 * sentences of its input, so long system messages make long, costly answers and prompts.
 */
export function prose(rng: Rng, words: number): string {
  const out: string[] = [];
  let count = 0;
  while (count < words) {
    const s = sentence(rng);
    out.push(s);
    count += s.split(" ").length;
  }
  return out.join(" ");
}

/** The messages of one call: a short or long system message, then a user question. */
export function messagesFor(rng: Rng, long: boolean): Array<{ role: string; content: string }> {
  const system = long ? prose(rng, rng.int(400, 2_500)) : prose(rng, rng.int(10, 60));
  // The fake upstream echoes the last user message, so its length sets the upstream's answer length.
  const user = `Question about ${rng.pick(WORDS)} and ${rng.pick(WORDS)}: ${prose(rng, rng.int(3, 250))}`;
  return [
    { role: "system", content: system },
    { role: "user", content: user },
  ];
}
