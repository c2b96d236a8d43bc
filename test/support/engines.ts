import { FinishReason } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineEvent, EngineRequest } from "../../src/engines/engine.ts";
import { createExtractiveEngine } from "../../src/engines/extractive/index.ts";
import type { ModelRegistry } from "../../src/engines/models.ts";
import { createTokenizer } from "../../src/engines/tokenizer.ts";
import { modelsServing, type TestModel } from "../../src/testing/engines.ts";

/** How a scripted test engine behaves. */
export interface ScriptedEngineOptions {
  /** The deltas to emit, one output token each unless `tokensPerDelta` says otherwise. */
  deltas?: string[];
  tokensPerDelta?: number;
  /** Pause before each delta, in ms. */
  delayMs?: number;
  /** Pause after this many deltas (a stall), in ms, honouring the signal. */
  stallAfter?: { deltas: number; ms: number };
  /** Throw this (built lazily) after this many deltas; 0 means before the first. */
  failAfter?: { deltas: number; error: () => unknown };
  finishReason?: FinishReason;
  /** When set, `ready()` rejects with this. */
  notReady?: Error;
}

/** What a scripted engine observed, for assertions. */
export interface EngineProbe {
  calls: number;
  /** Signals of every generate call, in order. */
  signals: AbortSignal[];
  /** Resolves when the nth call (1-based) has emitted its first delta. */
  started: Promise<void>;
}

/** A sleep that ends early (resolving) when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** An engine that plays a script: deltas, stalls and failures, and honours its signal. */
export function scriptedEngine(options: ScriptedEngineOptions = {}): Engine & { probe: EngineProbe } {
  const deltas = options.deltas ?? ["Hello", " there", ",", " friend", "."];
  let markStarted: () => void = () => undefined;
  const probe: EngineProbe = {
    calls: 0,
    signals: [],
    started: new Promise<void>((resolve) => {
      markStarted = resolve;
    }),
  };
  async function* generate(_request: EngineRequest, signal: AbortSignal): AsyncGenerator<EngineEvent> {
    probe.calls++;
    probe.signals.push(signal);
    for (let i = 0; i < deltas.length; i++) {
      if (options.failAfter && options.failAfter.deltas === i) throw options.failAfter.error();
      if (options.stallAfter && options.stallAfter.deltas === i) await sleep(options.stallAfter.ms, signal);
      if (options.delayMs) await sleep(options.delayMs, signal);
      if (signal.aborted) return;
      yield { type: "delta", text: deltas[i] ?? "", tokens: options.tokensPerDelta ?? 1 };
      if (i === 0) markStarted();
    }
    if (options.failAfter && options.failAfter.deltas >= deltas.length) throw options.failAfter.error();
    yield { type: "done", finishReason: options.finishReason ?? FinishReason.STOP };
  }
  return {
    probe,
    generate,
    ready: () => (options.notReady ? Promise.reject(options.notReady) : Promise.resolve()),
  };
}

/**
 * A registry with the built-in `service-extract` (real extractive engine, default prices)
 * plus the given test models.
 */
export function registryWith(models: TestModel[]): ModelRegistry {
  const extractive = createExtractiveEngine({ tokenizer: createTokenizer() });
  return modelsServing([{ name: "service-extract", engine: extractive }, ...models]);
}

/** A test engine whose calls all wait on one gate, so a test decides when they finish. */
export function gatedEngine(): Engine & { startedCalls(n: number): Promise<void>; open(): void } {
  let opened = false;
  let openGate: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    openGate = () => {
      opened = true;
      resolve();
    };
  });
  let started = 0;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  async function* generate(_request: unknown, signal: AbortSignal): AsyncGenerator<EngineEvent> {
    started += 1;
    for (const w of waiters.filter((x) => x.n <= started)) w.resolve();
    if (!opened) {
      await new Promise<void>((resolve) => {
        void gate.then(resolve);
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    if (signal.aborted) return;
    yield { type: "delta", text: "Rivers", tokens: 1 };
    yield { type: "done", finishReason: FinishReason.STOP };
  }
  return {
    generate,
    ready: () => Promise.resolve(),
    startedCalls: (n) =>
      started >= n
        ? Promise.resolve()
        : new Promise((resolve) => {
            waiters.push({ n, resolve });
          }),
    open: openGate,
  };
}
