import type { ModelRegistry } from "../../src/engines/models.ts";
import { registryWith, scriptedEngine } from "./engines.ts";

/** The name of the slow test model. */
export const SLOW_MODEL = "slow";

/** How the slow model paces its answer: one delta every `delayMs`, `deltas` of them. */
export const SLOW_PACE = { deltas: 40, delayMs: 50 } as const;

/**
 * A registry with the built-in `service-extract` plus `slow`, a scripted engine that emits one
 * word every 50 ms for 40 words (about 2 s) and honours its AbortSignal, so a fault can be
 * injected while a call is in flight. Prices are the defaults of `registryWith` (1 and 2 USD
 * micros per token in and out).
 */
export function slowModels(): ModelRegistry {
  const deltas = Array.from({ length: SLOW_PACE.deltas }, (_, i) => ` w${i}`);
  return registryWith([{ name: SLOW_MODEL, engine: scriptedEngine({ deltas, delayMs: SLOW_PACE.delayMs }) }]);
}
