import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine } from "../../engines/engine.ts";
import {
  backends,
  createLifecycleCore,
  hi,
  manualGate,
  NOTHING_BILLED,
  readSome,
  steeredEngine,
} from "../../testing/call-lifecycle.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/**
 * The life of a call (DESIGN, "Life of a call") when something fails: a store step whose
 * request or reply is lost, an engine that throws, the process's limit of calls in flight and
 * the spend cap cutting a stream. Every way out still ends in exactly one settle or one
 * release, on both stores. Callers that leave are in lifecycle.test.ts.
 */

describe.each(backends)("the life of a call (%s store)", (_name, makeStore) => {
  it.each([false, true])(
    "a settle whose reply is lost is resolved by id: billed, and the caller is told so (stream: %s)",
    async (stream) => {
      const t = await createLifecycleCore(makeStore, steeredEngine(3).engine);
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
      const t = await createLifecycleCore(makeStore, steeredEngine(3).engine);
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
    const t = await createLifecycleCore(makeStore, steered.engine);
    t.store.loseReply("chargeRateLimit");
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
    const t = await createLifecycleCore(makeStore, steeredEngine(50).engine, { capUsdMicros: 7n + 2n * 60n });
    const gate = t.store.pause("extendReservation");
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
    t.store.loseReply("extendReservation");
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
    const t = await createLifecycleCore(makeStore, throwing);
    await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, { headers: t.headers }),
      Code.Internal,
      "internal_error",
    );
    expect(await t.ledger()).toEqual(NOTHING_BILLED);
  });

  it("a process at its limit of calls in flight refuses last: the rules' answers come first", async () => {
    const before = manualGate();
    const t = await createLifecycleCore(makeStore, steeredEngine(3, before.arrived).engine, { maxCallsInFlight: 1 });
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
    expect((await busy).choices[0]?.content).toBe("aaa");
    // The refused call's hold was released; the busy one was charged.
    const ledger = await t.ledger();
    expect(ledger).toMatchObject({ reserved: 0, records: 1 });
    expect(ledger.outcomes.flat().sort()).toEqual(["released", "settled"]);
  });

  it("a spend-cap cut charges exactly the deltas its reader received, not those it never took", async () => {
    // The cap covers the prompt (7) and 16 output tokens; the engine would write 50. The
    // reader takes one delta and then waits past the write timeout: the buffered ones are
    // dropped, never delivered and never charged.
    const t = await createLifecycleCore(makeStore, steeredEngine(50).engine, {
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
    const t = await createLifecycleCore(makeStore, silent, { capUsdMicros: 40n });
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
