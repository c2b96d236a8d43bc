import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import {
  backends,
  callOutcome,
  createLifecycleCore,
  hi,
  manualGate,
  NOTHING_BILLED,
  readSome,
  steeredEngine,
} from "../../testing/call-lifecycle.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/**
 * The life of a call (DESIGN, "Life of a call"): every way out ends in exactly one settle or
 * one release, on both stores. Here the caller leaves, at each step of the call; store faults,
 * engine failures and limits are in lifecycle-faults.test.ts.
 */

describe.each(backends)("the life of a call (%s store)", (_name, makeStore) => {
  it.each([false, true])("a caller gone before admission holds and runs nothing (stream: %s)", async (stream) => {
    const steered = steeredEngine(3);
    const t = await createLifecycleCore(makeStore, steered.engine);
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
      const t = await createLifecycleCore(makeStore, steered.engine);
      const gate = t.store.pause("chargeRateLimit");
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
      const t = await createLifecycleCore(makeStore, steered.engine);
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

  it("a caller gone mid-stream, its iterator never resumed: released, unbilled, logged as a cancellation", async () => {
    const steered = steeredEngine(10_000);
    const t = await createLifecycleCore(makeStore, steered.engine);
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
    const t = await createLifecycleCore(makeStore, steered.engine, { writeTimeoutMs: 200 });
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
    const t = await createLifecycleCore(makeStore, steered.engine);
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
});
