import { FinishReason } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineRequest } from "../engines/engine.ts";
import { createModelRegistry, type ModelEntry, type ModelRegistry } from "../engines/models.ts";

/**
 * An engine that answers "ok" in one token: the default of the test core, for suites that are
 * about keys, accounts or the Admin API rather than about what a model says.
 */
export const okEngine: Engine = {
  async *generate() {
    yield { type: "delta", text: "ok", tokens: 1 };
    yield { type: "done", finishReason: FinishReason.STOP };
  },
  ready: async () => undefined,
};

/**
 * Yields `n` one-token deltas of "a", cut at max_tokens (then finishing with LENGTH), and records
 * every request in `seen`: billing tests can count the exact tokens they expect to be charged.
 */
export function countingEngine(n: number, seen: EngineRequest[] = []): Engine {
  return {
    async *generate(request) {
      seen.push(request);
      const count = Math.min(n, request.maxTokens);
      for (let i = 0; i < count; i++) yield { type: "delta", text: "a", tokens: 1 };
      yield { type: "done", finishReason: n > request.maxTokens ? FinishReason.LENGTH : FinishReason.STOP };
    },
    ready: async () => undefined,
  };
}

/** A test model: its name, its engine and its prices (micros per million tokens; service-extract's by default). */
export interface TestModel {
  name: string;
  engine: Engine;
  inputUsdMicrosPerMillion?: number;
  outputUsdMicrosPerMillion?: number;
  /** A free model charges nothing (its prices should then be 0). */
  free?: boolean;
}

/**
 * A registry that serves exactly the given models, each by its own engine, so one test core can
 * put several steered engines side by side under the names and prices a test chooses.
 */
export function modelsServing(models: TestModel[]): ModelRegistry {
  const engines = new Map(models.map((m) => [m.name, m.engine]));
  const entries = models.map(
    (m): ModelEntry => ({
      name: m.name,
      engine: "extractive",
      inputUsdMicrosPerMillion: m.inputUsdMicrosPerMillion ?? 1_000_000,
      outputUsdMicrosPerMillion: m.outputUsdMicrosPerMillion ?? 2_000_000,
      free: m.free ?? false,
      tokenizer: "o200k_base",
    }),
  );
  return createModelRegistry(entries, (entry) => {
    const engine = engines.get(entry.name);
    if (!engine) throw new Error(`no engine for ${entry.name}`);
    return engine;
  });
}
