import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { AdminService } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { CompletionService, FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { startRedisServer, type RedisServer } from "../../../test/support/redis-server.ts";
import type { Engine, EngineEvent } from "../../engines/engine.ts";
import { BUILTIN_MODELS, createModelRegistry } from "../../engines/models.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { createLogger } from "../../logger.ts";
import { createMemoryStore } from "../../store/memory/index.ts";
import { connectRedis } from "../../store/redis/client.ts";
import { createRedisStore } from "../../store/redis/index.ts";
import type { Store } from "../../store/store.ts";
import { gatedStore, type Gate } from "../../testing/gated-store.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { createLocalTransport } from "../local-transport.ts";
import { createCore } from "../routes.ts";

/**
 * The life of a call (DESIGN, "Life of a call"): every way out ends in exactly one settle or
 * one release, on both stores. Races are made deterministic with a gated store and a gated
 * engine; nothing here sleeps in the hope of hitting one.
 */

const ADMIN = { headers: { authorization: "Bearer admin-token-for-tests" } };
const hi = { messages: [{ role: "user", content: "hi" }] };

let redisServer: Promise<RedisServer> | undefined;
const opened: Store[] = [];
afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await (await redisServer)?.close();
});

const backends: Array<[string, () => Promise<Store>]> = [
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
function steeredEngine(deltas: number, before?: Promise<void>) {
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

/** A gate the test opens by hand. */
function manualGate(): Gate {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { arrived: wait, open };
}

async function setup(
  makeStore: () => Promise<Store>,
  engine: Engine,
  options: { capUsdMicros?: bigint; writeTimeoutMs?: number; maxCallsInFlight?: number } = {},
) {
  const store = gatedStore(await makeStore());
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger("debug", (line) => void lines.push(JSON.parse(line) as Record<string, unknown>));
  const core = createCore({
    store,
    models: createModelRegistry(BUILTIN_MODELS, () => engine),
    tokenizer: createTokenizer(),
    logger,
    now: Date.now,
    reservationTtlMs: 60_000,
    adminToken: "admin-token-for-tests",
    writeTimeoutMs: options.writeTimeoutMs ?? 30_000,
    ...(options.maxCallsInFlight !== undefined && { maxCallsInFlight: options.maxCallsInFlight }),
  });
  const transport = createRouterTransport(core.routes, { router: { interceptors: core.interceptors } });
  const admin = createClient(AdminService, transport);
  const { account } = await admin.createAccount(
    { onboardingComplete: true, spendCapUsdMicros: options.capUsdMicros ?? 10_000_000n },
    ADMIN,
  );
  const accountId = account?.id ?? "";
  const { secret } = await admin.createApiKey({ accountId, burst: 1000, rateLimitRps: 1000 }, ADMIN);
  /** Waits for every call and background release to end, then reads the ledger. */
  const ledger = async () => {
    expect(await core.calls.drain(10_000)).toBe(true);
    const a = (await admin.getAccount({ accountId }, ADMIN)).account;
    const records = (await admin.listUsageRecords({ accountId, pageSize: 100 }, ADMIN)).usageRecords;
    return {
      spent: Number(a?.spentUsdMicros),
      reserved: Number(a?.reservedUsdMicros),
      records: records.length,
      outcomes: [...store.outcomes.values()],
    };
  };
  const local = createClient(CompletionService, createLocalTransport(core.routes, core.interceptors));
  return {
    store,
    core,
    lines,
    completion: createClient(CompletionService, transport),
    local,
    headers: { authorization: `Bearer ${secret}` },
    ledger,
  };
}

/** Reads a stream's messages until `count` have arrived, then leaves the iterator open (not returned). */
async function readSome<T>(stream: AsyncIterable<T>, count: number): Promise<{ got: T[]; it: AsyncIterator<T> }> {
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
function callOutcome(
  t: Awaited<ReturnType<typeof setup>>,
  stream: boolean,
  signal: AbortSignal,
): Promise<Code | "answered"> {
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

const NOTHING_BILLED = { spent: 0, reserved: 0, records: 0, outcomes: [["released"]] };

describe.each(backends)("the life of a call (%s store)", (_name, makeStore) => {
  it.each([false, true])("a caller gone before admission holds and runs nothing (stream: %s)", async (stream) => {
    const steered = steeredEngine(3);
    const t = await setup(makeStore, steered.engine);
    const abort = new AbortController();
    abort.abort();
    const run = stream
      ? async () => {
          for await (const _ of t.completion.streamChatCompletion(
            { params: hi },
            { headers: t.headers, signal: abort.signal },
          )) {
            /* none */
          }
        }
      : () => t.completion.createChatCompletion({ params: hi }, { headers: t.headers, signal: abort.signal });
    await expect(run()).rejects.toMatchObject({ code: Code.Canceled });
    expect(await t.ledger()).toEqual({ spent: 0, reserved: 0, records: 0, outcomes: [] });
    expect(steered.seen.calls).toBe(0);
  });

  it.each([false, true])(
    "a caller gone during the admission round trip gets its hold released, unbilled (stream: %s)",
    async (stream) => {
      const steered = steeredEngine(3);
      const t = await setup(makeStore, steered.engine);
      const gate = t.store.pause("admit");
      const abort = new AbortController();
      const outcome = callOutcome(t, stream, abort.signal);
      await gate.arrived;
      abort.abort();
      gate.open();
      expect(await outcome).toBe(Code.Canceled);
      expect(await t.ledger()).toEqual(NOTHING_BILLED);
      expect(steered.seen.calls).toBe(0);
    },
  );

  it.each([false, true])(
    "a caller gone before the first token: engine cancelled, hold released (stream: %s)",
    async (stream) => {
      const before = manualGate();
      const steered = steeredEngine(3, before.arrived);
      const t = await setup(makeStore, steered.engine);
      const abort = new AbortController();
      const outcome = callOutcome(t, stream, abort.signal);
      await steered.started;
      abort.abort();
      expect(await outcome).toBe(Code.Canceled);
      expect(await t.ledger()).toEqual(NOTHING_BILLED);
      expect(steered.seen.signals[0]?.aborted).toBe(true);
      before.open();
    },
  );

  it("a caller gone mid-stream that never resumes its iterator: released, unbilled, recorded as a cancellation", async () => {
    const steered = steeredEngine(10_000);
    const t = await setup(makeStore, steered.engine);
    const abort = new AbortController();
    await readSome(t.completion.streamChatCompletion({ params: hi }, { headers: t.headers, signal: abort.signal }), 3);
    abort.abort();
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
    expect(steered.seen.pulled).toBeLessThan(10_000);
    // DESIGN: a caller that leaves is a cancellation, logged at info, never an internal error.
    expect(t.lines.filter((l) => l.level === "error")).toEqual([]);
    expect(t.lines.filter((l) => l.msg === "rpc" && l.code === "Canceled")).toHaveLength(1);
  });

  it("a reader that stops reading pauses the engine, then is ended unbilled at the write timeout", async () => {
    const steered = steeredEngine(4000);
    const t = await setup(makeStore, steered.engine, { writeTimeoutMs: 200 });
    const { it: reader } = await readSome(t.completion.streamChatCompletion({ params: hi }, { headers: t.headers }), 1);
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
    // Paused: it produced what the buffers hold, far from the whole answer.
    expect(steered.seen.pulled).toBeLessThan(4000);
    await expectFailure(
      async () => {
        for (;;) if ((await reader.next()).done) return;
      },
      Code.Canceled,
      "canceled",
    );
  });

  it("a caller gone after the engine finished is charged once, with its record", async () => {
    const steered = steeredEngine(3);
    const t = await setup(makeStore, steered.engine);
    const gate = t.store.pause("settle");
    const abort = new AbortController();
    const call = t.completion
      .createChatCompletion({ params: hi }, { headers: t.headers, signal: abort.signal })
      .catch(() => undefined);
    await gate.arrived;
    abort.abort();
    gate.open();
    await call;
    const ledger = await t.ledger();
    expect(ledger).toMatchObject({ reserved: 0, records: 1, outcomes: [["settled"]] });
    expect(ledger.spent).toBe(7 + 2 * 3);
  });

  it.each([false, true])(
    "a settle whose reply is lost is resolved by id: billed, and the caller is told so (stream: %s)",
    async (stream) => {
      const t = await setup(makeStore, steeredEngine(3).engine);
      t.store.loseReply("settle");
      if (stream) {
        const events = [];
        for await (const e of t.completion.streamChatCompletion({ params: hi }, { headers: t.headers }))
          events.push(e.event.case);
        expect(events.at(-1)).toBe("usage");
      } else {
        const res = await t.completion.createChatCompletion({ params: hi }, { headers: t.headers });
        expect(res.usage?.completionTokens).toBe(3n);
      }
      // The settle landed; the release that resolved it found it settled and changed nothing.
      expect(await t.ledger()).toEqual({ spent: 13, reserved: 0, records: 1, outcomes: [["settled", "settled"]] });
    },
  );

  it.each([false, true])(
    "a settle whose request is lost is resolved by id: not billed, and the caller is told so (stream: %s)",
    async (stream) => {
      const t = await setup(makeStore, steeredEngine(3).engine);
      t.store.loseRequest("settle");
      await expectFailure(
        async () => {
          if (!stream) return t.completion.createChatCompletion({ params: hi }, { headers: t.headers });
          for await (const _ of t.completion.streamChatCompletion({ params: hi }, { headers: t.headers })) {
            /* drain */
          }
        },
        Code.Unavailable,
        "service_unavailable",
      );
      expect(await t.ledger()).toEqual(NOTHING_BILLED);
    },
  );

  it("an admission whose reply is lost answers 503 and releases the hold it took", async () => {
    const steered = steeredEngine(3);
    const t = await setup(makeStore, steered.engine);
    t.store.loseReply("admit");
    await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, { headers: t.headers }),
      Code.Unavailable,
      "service_unavailable",
    );
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
    expect(steered.seen.calls).toBe(0);
  });

  it("an extension whose reply is lost ends the stream unbilled and drops the whole hold", async () => {
    // The cap covers the prompt and a few tokens, so output must extend the hold.
    const t = await setup(makeStore, steeredEngine(50).engine, { capUsdMicros: 7n + 2n * 60n });
    const gate = t.store.pause("reserve");
    const outcome = (async () => {
      for await (const _ of t.completion.streamChatCompletion(
        { params: { ...hi, maxTokens: 4n } },
        { headers: t.headers },
      )) {
        /* drain */
      }
    })().then(
      () => "completed",
      (err: unknown) => ConnectError.from(err).code,
    );
    await gate.arrived;
    t.store.loseReply("reserve");
    gate.open();
    expect(await outcome).toBe(Code.Unavailable);
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
  });

  it("an engine whose generate() throws at once fails the call, releases its hold and stops renewing it", async () => {
    const throwing: Engine = {
      generate() {
        throw new Error("no such engine state");
      },
      ready: async () => undefined,
    };
    const t = await setup(makeStore, throwing);
    await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, { headers: t.headers }),
      Code.Internal,
      "internal_error",
    );
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
  });

  it("a process at its limit of calls in flight refuses last: the rules' answers come first", async () => {
    const before = manualGate();
    const t = await setup(makeStore, steeredEngine(3, before.arrived).engine, { maxCallsInFlight: 1 });
    const busy = t.completion.createChatCompletion({ params: hi }, { headers: t.headers });
    await expectFailure(
      () => t.completion.createChatCompletion({ params: { messages: [] } }, { headers: t.headers }),
      Code.InvalidArgument,
      "invalid_request_body",
    );
    await expectFailure(
      () => t.completion.createChatCompletion({ params: { ...hi, model: "nope" } }, { headers: t.headers }),
      Code.NotFound,
      "model_not_found",
    );
    const full = await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, { headers: t.headers }),
      Code.Unavailable,
      "service_unavailable",
    );
    expect(full.metadata.get("x-ratelimit-limit-requests")).toBe("1000");
    before.open();
    expect((await busy).content).toBe("aaa");
    // The refused call's hold was released; the busy one was charged.
    const ledger = await t.ledger();
    expect(ledger).toMatchObject({ reserved: 0, records: 1 });
    expect(ledger.outcomes.flat().sort()).toEqual(["released", "settled"]);
  });

  it("a spend-cap cut charges exactly the deltas its reader received, not those it never took", async () => {
    // The cap covers the prompt (7) and 16 output tokens; the engine would write 50. The
    // reader takes one delta and then waits past the write timeout: the buffered ones are
    // dropped, never delivered and never charged.
    const t = await setup(makeStore, steeredEngine(50).engine, {
      capUsdMicros: 7n + 2n * 16n + 1n,
      writeTimeoutMs: 200,
    });
    const cut = t.store.pause("settle");
    const { got, it: reader } = await readSome(t.local.streamChatCompletion({ params: hi }, { headers: t.headers }), 1);
    await cut.arrived;
    cut.open();
    const rest: string[] = [];
    await expectFailure(
      async () => {
        for (;;) {
          const next = await reader.next();
          if (next.done) return;
          rest.push(next.value.event.case ?? "");
        }
      },
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    const received = got.length + rest.length;
    expect(received).toBeLessThan(16);
    expect(await t.ledger()).toEqual({ spent: 7 + 2 * received, reserved: 0, records: 0, outcomes: [["settled"]] });
  });

  it("a stream cut before any chunk reached its reader is refused whole, not billed", async () => {
    // Deltas that carry tokens but no text never reach the reader.
    const silent: Engine = {
      async *generate() {
        for (let i = 0; i < 10; i++) yield { type: "delta", text: "", tokens: 5 };
        yield { type: "done", finishReason: FinishReason.STOP };
      },
      ready: async () => undefined,
    };
    const t = await setup(makeStore, silent, { capUsdMicros: 40n });
    await expectFailure(
      async () => {
        for await (const _ of t.completion.streamChatCompletion({ params: hi }, { headers: t.headers })) {
          /* none arrive */
        }
      },
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
  });
});
