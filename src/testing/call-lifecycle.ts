import { randomUUID } from "node:crypto";
import { type Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterAll, expect } from "vitest";
import { CompletionService, FinishReason } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { startRedisServer, type RedisServer } from "../../test/support/redis-server.ts";
import type { Engine, EngineEvent } from "../engines/engine.ts";
import { createLogger } from "../logger.ts";
import { createLocalTransport } from "../services/local-transport.ts";
import { createMemoryStore } from "../store/memory/index.ts";
import { connectRedis } from "../store/redis/client.ts";
import { createRedisStore } from "../store/redis/index.ts";
import type { Store } from "../store/store.ts";
import { ADMIN, createCoreFixture } from "./core-fixture.ts";
import { gatedStore, type Gate } from "./gated-store.ts";

/**
 * What the life-of-a-call suites (src/services/completion/lifecycle*.test.ts) share: both
 * stores, a steered engine, a gated core with its ledger, and ways to read part of a stream.
 * Races are made deterministic with the gated store and the steered engine; nothing sleeps in
 * the hope of hitting one.
 */

/** The one-message chat every lifecycle test sends. */
export const hi = { messages: [{ role: "user", content: "hi" }] };

let redisServer: Promise<RedisServer> | undefined;
const opened: Store[] = [];
// Registered when a test file imports this module, so each file closes the stores and the server it opened.
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await (await redisServer)?.close();
});

/** The two stores every lifecycle test runs on; the Redis one on a redis-server of the test file's own. */
export const backends: Array<[string, () => Promise<Store>]> = [
  ["memory", async () => createMemoryStore()],
  [
    "redis",
    async () => {
      redisServer ??= startRedisServer();
      const { url } = await redisServer;
      const store = createRedisStore({ redis: await connectRedis(url), prefix: `l${randomUUID().slice(0, 8)}` });
      opened.push(store);
      return store;
    },
  ],
];

/** An engine the test steers: it waits at `before` (when set), then yields `deltas` one-token deltas, then finishes. */
export function steeredEngine(deltas: number, before?: Promise<void>) {
  const seen = { calls: 0, pulled: 0, signals: [] as AbortSignal[] };
  let markStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  const engine: Engine = {
    async *generate(_request, signal): AsyncGenerator<EngineEvent> {
      seen.calls++;
      seen.signals.push(signal);
      markStarted();
      if (before) await before;
      for (let i = 0; i < deltas; i++) {
        if (signal.aborted) return;
        seen.pulled++;
        yield { type: "delta", text: "a", tokens: 1 };
      }
      yield { type: "done", finishReason: FinishReason.STOP };
    },
    ready: async () => undefined,
  };
  return { engine, seen, started };
}

/** A gate the test opens by hand, for an engine to wait on. */
export function manualGate(): Gate {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { arrived: wait, open };
}

/**
 * A core over a gated `makeStore()` store and `engine`, with an account and a key, its debug log
 * lines, a client on the router and one on the local transport, and `ledger()`.
 */
export async function createLifecycleCore(
  makeStore: () => Promise<Store>,
  engine: Engine,
  options: { capUsdMicros?: bigint; writeTimeoutMs?: number; maxCallsInFlight?: number } = {},
) {
  const store = gatedStore(await makeStore());
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger("debug", (line) => void lines.push(JSON.parse(line) as Record<string, unknown>));
  const { core, admin, completion, newAccount, account } = createCoreFixture({
    store,
    engine,
    logger,
    writeTimeoutMs: options.writeTimeoutMs ?? 30_000,
    ...(options.maxCallsInFlight !== undefined && { maxCallsInFlight: options.maxCallsInFlight }),
  });
  const { accountId, authorization } = await newAccount({
    capUsdMicros: options.capUsdMicros ?? 10_000_000n,
    burst: 1000,
    rateLimitRps: 1000,
  });
  /** Waits for every call and background release to end, then reads the ledger. */
  const ledger = async () => {
    expect(await core.calls.drain(10_000)).toBe(true);
    const a = await account(accountId);
    const records = (await admin.listUsageRecords({ accountId, pageSize: 100 }, ADMIN)).usageRecords;
    return {
      spent: Number(a?.spentUsdMicros),
      reserved: Number(a?.reservedUsdMicros),
      records: records.length,
      outcomes: [...store.outcomes.values()],
    };
  };
  const local = createClient(CompletionService, createLocalTransport(core.routes, core.interceptors));
  return { store, core, lines, completion, local, headers: { authorization }, ledger };
}

/** What `createLifecycleCore` resolves to. */
export type LifecycleCore = Awaited<ReturnType<typeof createLifecycleCore>>;

/** Reads a stream's messages until `count` have arrived, then leaves the iterator open (not returned). */
export async function readSome<T>(
  stream: AsyncIterable<T>,
  count: number,
): Promise<{ got: T[]; it: AsyncIterator<T> }> {
  const it = stream[Symbol.asyncIterator]();
  const got: T[] = [];
  while (got.length < count) {
    const step = await it.next();
    if (step.done) break;
    got.push(step.value);
  }
  return { got, it };
}

/** Runs a whole call (unary, or a stream read to its end) and resolves with how it ended. */
export function callOutcome(t: LifecycleCore, stream: boolean, signal: AbortSignal): Promise<Code | "answered"> {
  const options = { headers: t.headers, signal };
  const call = stream
    ? (async () => {
        for await (const _ of t.completion.streamChatCompletion({ params: hi }, options)) {
          /* read to the end */
        }
      })()
    : t.completion.createChatCompletion({ params: hi }, options);
  return call.then(
    () => "answered" as const,
    (err: unknown) => ConnectError.from(err).code,
  );
}

/** The ledger of a call that ended unbilled: one release, nothing spent, held or recorded. */
export const NOTHING_BILLED = { spent: 0, reserved: 0, records: 0, outcomes: [["released"]] };
