import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineEvent, EngineRequest } from "../engine.ts";
import type { Tokenizer } from "../tokenizer.ts";
import { composeAnswer } from "./answer.ts";
import { planOutput } from "./deltas.ts";

/** What the extractive engine needs: the tokenizer the core counts with. */
export interface ExtractiveEngineDeps {
  /**
   * Shared with the core so that the streamed deltas are the same tokens the core bills; the
   * engine only tokenizes its own (short) answer, never the whole conversation.
   */
  tokenizer: Tokenizer;
}

/** Output tokens between two trips to the event loop, so a long answer never starves it. */
const TOKENS_PER_TURN = 64;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Builds the built-in `extractive` engine behind the model `service-extract`: it answers with
 * the sentences of the conversation most relevant to the last user message (BM25), in their
 * original order, or with a lead summary when nothing matches.
 *
 * It exists so the gateway can be exercised end to end (streaming, limits, billing,
 * cancellation) with no upstream model, fast and reproducibly.
 *
 * Sampling differs from the engine contract's default on purpose: an undefined `temperature`
 * is treated as 0, so that by default the same conversation always gets the same answer. With
 * a temperature above 0 the sentences are sampled (softmax of score / temperature, nucleus
 * `topP`) from a PRNG seeded by `seed`, so the same seed and parameters repeat the answer; no
 * seed means a random one.
 *
 * The answer streams as token-sized deltas, cut before the first stop string (STOP) or after
 * `maxTokens` tokens (LENGTH), whichever comes first. Aborting `signal` ends the stream at the
 * next delta without a `done` event.
 */
export function createExtractiveEngine(deps: ExtractiveEngineDeps): Engine {
  const { tokenizer } = deps;

  async function* generate(request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent> {
    if (signal.aborted) return;
    const n = request.n ?? 1;
    const finishes: Array<{ finishReason: FinishReason }> = [];
    let sinceTurn = 0;
    // With n > 1, answer i uses seed + i, so a seeded call repeats every one of its answers.
    for (let choice = 0; choice < n; choice++) {
      const answer = composeAnswer(request.messages, {
        temperature: request.temperature ?? 0,
        topP: request.topP ?? 1,
        seed: request.seed === undefined ? undefined : request.seed + BigInt(choice),
      });
      const plan = planOutput(tokenizer, answer, request.stop, request.maxTokens);
      for (const [i, piece] of plan.pieces.entries()) {
        if (signal.aborted) return;
        yield {
          type: "delta",
          text: piece.text,
          tokens: piece.tokens,
          last: i === plan.pieces.length - 1,
          ...(n > 1 && { choice }),
        };
        sinceTurn += piece.tokens;
        if (sinceTurn >= TOKENS_PER_TURN) {
          sinceTurn = 0;
          await nextTurn();
        }
      }
      finishes.push({ finishReason: plan.finishReason });
    }
    if (signal.aborted) return;
    const first = finishes[0]?.finishReason ?? FinishReason.STOP;
    yield { type: "done", finishReason: first, ...(n > 1 && { choices: finishes }) };
  }

  return {
    generate,
    ready: () => Promise.resolve(),
  };
}
