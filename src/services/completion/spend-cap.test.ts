import { Code, type ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { CATALOGUE, retryAfterMsOf } from "../../errors/catalogue.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { manualGate, steeredEngine } from "../../testing/call-lifecycle.ts";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { drain } from "../../testing/drain.ts";
import { countingEngine, modelsServing } from "../../testing/engines.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { heldRetryMs, MIN_HELD_RETRY_MS, TEMPORARY } from "./spend-cap.ts";

/**
 * Honest retry signals of `spend_cap_exceeded` (issue 11, item 5): a refusal that only other
 * calls' live holds cause is temporary (`ErrorInfo.metadata.temporary` "true", a delay of at
 * most the reservation TTL), at admission and when a running call grows its hold; one the
 * period's spend causes says "false" and waits for the next period. A gated call holds the
 * budget open, so no race is left to timing.
 */

/** Mid-month, so that the next UTC period starts in exactly 15.5 days. */
const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const MS_TO_NEXT_PERIOD = 15.5 * 86_400_000;
const TTL = 20_000;
/** What "hi" costs in input (7 tokens at 1 micro); each output token costs 2. */
const HI_PROMPT = 7;
const hi = { messages: [{ role: "user", content: "hi" }] };

/**
 * A core on a clock the test moves, serving `service-extract` (10 tokens of "a") and `holder`,
 * whose calls wait at a gate the test opens.
 */
async function setup(capUsdMicros: bigint) {
  const clock = { now: NOW };
  const gate = manualGate();
  const holder = steeredEngine(1, gate.arrived);
  const models = modelsServing([
    { name: "service-extract", engine: countingEngine(10) },
    { name: "holder", engine: holder.engine },
  ]);
  const fixture = createCoreFixture({
    models,
    tokenizer: createTokenizer(),
    now: () => clock.now,
    reservationTtlMs: TTL,
  });
  const { accountId, call } = await fixture.newAccount({ capUsdMicros, burst: 1_000 });
  /** Resolves once the holder holds its reservation, with its call (which ends once `gate` opens). */
  const hold = async (maxTokens: bigint) => {
    const done = fixture.completion.createChatCompletion({ params: { ...hi, model: "holder", maxTokens } }, call);
    await holder.started;
    return { done };
  };
  const balance = async () => {
    const a = await fixture.account(accountId);
    return { spent: Number(a?.spentUsdMicros), reserved: Number(a?.reservedUsdMicros) };
  };
  return { clock, gate, hold, balance, completion: fixture.completion, call };
}

const temporaryOf = (err: ConnectError) => err.findDetails(ErrorInfoSchema)[0]?.metadata[TEMPORARY];

describe("spend_cap_exceeded retry signals", () => {
  it("refuses a call that only another call's hold keeps out as temporary, until that hold clears", async () => {
    const { clock, gate, hold, balance, completion, call } = await setup(20n);
    // The holder reserves its worst case, 7 + 2 * 5 = 17, leaving 3: too little for 7 + 2.
    const { done } = await hold(5n);
    clock.now += 5_000;
    for (const stream of [false, true]) {
      const err = await expectFailure(
        () =>
          stream
            ? drain(completion.streamChatCompletion({ params: hi }, call))
            : completion.createChatCompletion({ params: hi }, call),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
      expect(temporaryOf(err)).toBe("true");
      // Until the holder's hold expires unless renewed: it was taken 5 s ago.
      expect(retryAfterMsOf(err)).toBe(TTL - 5_000);
      expect(err.rawMessage).not.toBe(CATALOGUE.spend_cap_exceeded.message);
    }
    expect(await balance()).toEqual({ spent: 0, reserved: 17 });
    gate.open();
    await done;
    // The holder was charged 7 + 2: 11 are left, enough for a call of one output token.
    const after = await completion.createChatCompletion({ params: { ...hi, maxTokens: 1n } }, call);
    expect(after.choices[0]?.content).toBe("a");
    expect(await balance()).toEqual({ spent: 18, reserved: 0 });
  });

  it("refuses a call the period's spend keeps out as not temporary, until the next period", async () => {
    const { completion, call } = await setup(8n);
    const err = await expectFailure(
      () => completion.createChatCompletion({ params: hi }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(temporaryOf(err)).toBe("false");
    expect(retryAfterMsOf(err)).toBe(MS_TO_NEXT_PERIOD);
    expect(err.rawMessage).toBe(CATALOGUE.spend_cap_exceeded.message);
  });

  describe("when a running call cannot grow its hold", () => {
    // The holder takes 17 of 40; the call is granted the 23 left (prompt and 8 tokens) and is
    // refused its 9th token: the spend would leave room for it, the holder's hold does not.
    it("cuts a stream after its 8 tokens, charges them, and says the cut is temporary", async () => {
      const { clock, gate, hold, balance, completion, call } = await setup(40n);
      const { done } = await hold(5n);
      clock.now += 5_000;
      let deltas = 0;
      const err = await expectFailure(
        async () => {
          for await (const m of completion.streamChatCompletion({ params: hi }, call))
            if (m.event.case === "delta") deltas += 1;
        },
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
      expect(deltas).toBe(8);
      expect(temporaryOf(err)).toBe("true");
      expect(retryAfterMsOf(err)).toBe(TTL - 5_000);
      expect(await balance()).toEqual({ spent: HI_PROMPT + 2 * 8, reserved: 17 });
      gate.open();
      await done;
    });

    it("refuses a unary call whole, unbilled, and says so the same way", async () => {
      const { clock, gate, hold, balance, completion, call } = await setup(40n);
      const { done } = await hold(5n);
      clock.now += 5_000;
      const err = await expectFailure(
        () => completion.createChatCompletion({ params: hi }, call),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
      expect(temporaryOf(err)).toBe("true");
      expect(retryAfterMsOf(err)).toBe(TTL - 5_000);
      expect(await balance()).toEqual({ spent: 0, reserved: 17 });
      gate.open();
      await done;
    });

    it("says a cut is not temporary when the call's own hold is all the spend leaves", async () => {
      const { completion, call, balance } = await setup(23n);
      const err = await expectFailure(
        () => drain(completion.streamChatCompletion({ params: hi }, call)),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
      expect(temporaryOf(err)).toBe("false");
      expect(retryAfterMsOf(err)).toBe(MS_TO_NEXT_PERIOD);
      expect(await balance()).toEqual({ spent: 23, reserved: 0 });
    });
  });

  it("waits at least 1 s, at most the TTL, and never past the next period", () => {
    expect(heldRetryMs(1, NOW, TTL)).toBe(MIN_HELD_RETRY_MS);
    expect(heldRetryMs(12_345, NOW, TTL)).toBe(12_345);
    expect(heldRetryMs(TTL + 5_000, NOW, TTL)).toBe(TTL);
    const nearMidnight = Date.UTC(2026, 11, 1) - 4_000;
    expect(heldRetryMs(15_000, nearMidnight, TTL)).toBe(4_000);
    expect(heldRetryMs(15_000, Date.UTC(2026, 11, 1) - 10, TTL)).toBe(MIN_HELD_RETRY_MS);
  });
});
