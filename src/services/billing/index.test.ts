import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it, vi } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine } from "../../engines/engine.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { countingEngine, modelsServing } from "../../testing/engines.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const P = 7; // prompt tokens of one user message "hi"
const hi = { messages: [{ role: "user", content: "hi" }] };

/** service-extract's prices: 1 micro per input token, 2 per output token. */
const extractCost = (prompt: number, completion: number) =>
  Math.ceil((prompt * 1_000_000 + completion * 2_000_000) / 1e6);

function failingEngine(k: number): Engine {
  return {
    async *generate() {
      for (let i = 0; i < k; i++) yield { type: "delta", text: "a", tokens: 1 };
      throw new Error("upstream exploded: secret-host:1234");
    },
    ready: async () => undefined,
  };
}

/** One delta every 5 ms until aborted; remembers whether the abort reached it. */
function slowEngine(state: { aborted: boolean }): Engine {
  return {
    async *generate(_request, signal) {
      for (let i = 0; i < 10_000; i++) {
        try {
          await sleep(5, undefined, { signal });
        } catch {
          state.aborted = true;
          return;
        }
        yield { type: "delta", text: "s", tokens: 1 };
      }
      yield { type: "done", finishReason: FinishReason.STOP };
    },
    ready: async () => undefined,
  };
}

function setup(
  engines: Record<string, Engine> = {},
  prices: Record<string, [number, number]> = {},
  time: { now?: () => number; ttlMs?: number } = {},
) {
  const all: Record<string, Engine> = { "service-extract": countingEngine(5), ...engines };
  const models = modelsServing(
    Object.entries(all).map(([name, engine]) => {
      const [input, output] = prices[name] ?? [1_000_000, 2_000_000];
      return { name, engine, inputUsdMicrosPerMillion: input, outputUsdMicrosPerMillion: output };
    }),
  );
  const fixture = createCoreFixture({
    models,
    now: time.now ?? (() => NOW),
    reservationTtlMs: time.ttlMs ?? 60_000,
  });
  const { completion, billing } = fixture;
  const newAccount = async (cap = 10_000_000n) => {
    const { accountId, call } = await fixture.newAccount({ capUsdMicros: cap, burst: 1_000 });
    const balance = async () => {
      const b = await billing.getBalance({}, call);
      return { spent: Number(b.spentUsdMicros), reserved: Number(b.reservedUsdMicros) };
    };
    const records = async () => (await billing.listUsageRecords({ pageSize: 1_000 }, call)).usageRecords;
    return { accountId, call, balance, records };
  };
  return { completion, billing, newAccount };
}

/** Reads a stream into its deltas, and the error that ended it, if any. */
async function collect<T extends { event: { case: string | undefined } }>(stream: AsyncIterable<T>) {
  const events: T[] = [];
  let error: unknown;
  try {
    for await (const e of stream) events.push(e);
  } catch (err) {
    error = err;
  }
  return { events, deltas: events.filter((e) => e.event.case === "delta").length, error };
}

describe("BillingService and billing through calls", () => {
  it("reports the period, the cap and an empty balance", async () => {
    const { billing, newAccount } = setup();
    const { call } = await newAccount(5_000_000n);
    expect(await billing.getBalance({}, call)).toMatchObject({
      period: "2026-11",
      spendCapUsdMicros: 5_000_000n,
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
    expect((await billing.listUsageRecords({}, call)).usageRecords).toEqual([]);
  });

  it("charges ceil((prompt*in + completion*out)/1e6) per completed call, unary and streaming", async () => {
    const { completion, newAccount } = setup({ seven: countingEngine(7) });
    const { call, balance } = await newAccount();
    await completion.createChatCompletion({ params: hi }, call);
    expect(await balance()).toEqual({ spent: extractCost(P, 5), reserved: 0 });
    expect(extractCost(P, 5)).toBe(17);
    await collect(completion.streamChatCompletion({ params: { ...hi, model: "seven" } }, call));
    expect(await balance()).toEqual({ spent: extractCost(P, 5) + extractCost(P, 7), reserved: 0 });
  });

  it("rounds a fractional cost up to a whole micro", async () => {
    const { completion, newAccount } = setup({ cheap: countingEngine(5) }, { cheap: [300_000, 700_000] });
    const { call, balance, records } = await newAccount();
    await completion.createChatCompletion({ params: { ...hi, model: "cheap" } }, call);
    // 7 * 0.3 + 5 * 0.7 = 5.6 micros.
    expect(await balance()).toEqual({ spent: 6, reserved: 0 });
    expect((await records())[0]?.costUsdMicros).toBe(6n);
  });

  it("writes exactly one usage record per completed call, newest first", async () => {
    const { completion, newAccount } = setup();
    const { accountId, call, records } = await newAccount();
    const a = await completion.createChatCompletion({ params: hi }, call);
    const { events } = await collect(completion.streamChatCompletion({ params: hi }, call));
    const c = await completion.createChatCompletion({ params: { prompt: "hi" } }, call);
    const listed = await records();
    expect(listed.map((r) => r.id)).toEqual([c.id, events[0]?.id, a.id]);
    for (const r of listed) {
      expect(r).toMatchObject({
        accountId,
        model: "service-extract",
        promptTokens: BigInt(P),
        completionTokens: 5n,
        costUsdMicros: 17n,
      });
      expect(r.apiKeyId).toMatch(/^key_/);
      expect(Number(r.createTime?.seconds)).toBe(Math.floor(NOW / 1000));
    }
  });

  it("pages usage records and refuses a bad page token or size", async () => {
    const { completion, billing, newAccount } = setup();
    const { call } = await newAccount();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await completion.createChatCompletion({ params: hi }, call)).id);
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await billing.listUsageRecords({ pageSize: 2, pageToken }, call);
      expect(page.usageRecords.length).toBeLessThanOrEqual(2);
      seen.push(...page.usageRecords.map((r) => r.id));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(seen).toEqual(ids);
    await expectFailure(
      () => billing.listUsageRecords({ pageToken: "garbage" }, call),
      Code.InvalidArgument,
      "invalid_argument",
    );
    await expectFailure(
      () => billing.listUsageRecords({ pageSize: -1 }, call),
      Code.InvalidArgument,
      "invalid_argument",
    );
  });

  it("neither charges nor records a call whose engine fails, unary or mid-stream", async () => {
    const { completion, newAccount } = setup({ broken: failingEngine(3) });
    const { call, balance, records } = await newAccount();
    const unary = await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, model: "broken" } }, call),
      Code.Internal,
      "internal_error",
    );
    expect(unary.rawMessage).not.toContain("secret-host");
    const streamed = await collect(completion.streamChatCompletion({ params: { ...hi, model: "broken" } }, call));
    expect(streamed.deltas).toBe(3);
    await expectFailure(() => Promise.reject(streamed.error), Code.Internal, "internal_error");
    expect(ConnectError.from(streamed.error).rawMessage).not.toContain("secret-host");
    expect(await balance()).toEqual({ spent: 0, reserved: 0 });
    expect(await records()).toEqual([]);
  });

  it("cancels the engine, releases the reservation and charges nothing when the client goes away", async () => {
    const state = { aborted: false };
    const { completion, newAccount } = setup({ slow: slowEngine(state) });
    const { call, balance, records } = await newAccount();
    const client = new AbortController();
    let delivered = 0;
    let error: unknown;
    try {
      for await (const e of completion.streamChatCompletion(
        { params: { ...hi, model: "slow" } },
        { ...call, signal: client.signal },
      )) {
        if (e.event.case === "delta" && ++delivered === 3) {
          expect((await balance()).reserved).toBeGreaterThan(0);
          client.abort();
        }
      }
    } catch (err) {
      error = err;
    }
    expect(delivered).toBe(3);
    expect(ConnectError.from(error).code).toBe(Code.Canceled);
    await vi.waitFor(
      async () => {
        expect(state.aborted).toBe(true);
        expect(await balance()).toEqual({ spent: 0, reserved: 0 });
      },
      { timeout: 2_000, interval: 10 },
    );
    expect(await records()).toEqual([]);
  });

  it("renews a running call's reservation so that it outlives its ttl", async () => {
    const state = { aborted: false };
    const { completion, newAccount } = setup({ slow: slowEngine(state) }, {}, { now: () => Date.now(), ttlMs: 600 });
    const { call, balance } = await newAccount();
    const started = Date.now();
    const client = new AbortController();
    let held = -1;
    // Connect's client iterables ignore `break`; only the signal cancels the call.
    const stream = completion.streamChatCompletion(
      { params: { ...hi, model: "slow" } },
      { ...call, signal: client.signal },
    );
    const { error } = await collect(
      (async function* () {
        for await (const e of stream) {
          yield e;
          if (held < 0 && Date.now() - started > 1_500) {
            held = (await balance()).reserved;
            client.abort();
          }
        }
      })(),
    );
    expect(ConnectError.from(error).code).toBe(Code.Canceled);
    expect(held).toBe(extractCost(P, 4096));
    await vi.waitFor(async () => expect(await balance()).toEqual({ spent: 0, reserved: 0 }), {
      timeout: 2_000,
      interval: 10,
    });
  });

  describe("mid-stream spend cap", () => {
    // Admits the call (9 micros) but covers only 5 output tokens: 7 + 5 * 2 = 17 <= 18 < 19.
    const cap = BigInt(extractCost(P, 5) + 1);

    it("cuts a stream after the covered deltas and charges exactly them, without a record", async () => {
      const { completion, newAccount } = setup({ long: countingEngine(20) });
      const { call, balance, records } = await newAccount(cap);
      const { deltas, error, events } = await collect(
        completion.streamChatCompletion({ params: { ...hi, model: "long", maxTokens: 100n } }, call),
      );
      expect(deltas).toBe(5);
      expect(events.some((e) => e.event.case === "usage" || e.event.case === "finishReason")).toBe(false);
      const err = await expectFailure(() => Promise.reject(error), Code.ResourceExhausted, "spend_cap_exceeded");
      expect(retryAfterMsOf(err)).toBe(15.5 * 86_400_000);
      expect(await balance()).toEqual({ spent: extractCost(P, deltas), reserved: 0 });
      expect(await records()).toEqual([]);
    });

    it("refuses a unary call that outgrows the cap, with no charge", async () => {
      const { completion, newAccount } = setup({ long: countingEngine(20) });
      const { call, balance, records } = await newAccount(cap);
      await expectFailure(
        () => completion.createChatCompletion({ params: { ...hi, model: "long", maxTokens: 100n } }, call),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
      expect(await balance()).toEqual({ spent: 0, reserved: 0 });
      expect(await records()).toEqual([]);
    });

    it("completes a call whose whole output fits, charging it once", async () => {
      const { completion, newAccount } = setup();
      const { call, balance, records } = await newAccount(BigInt(extractCost(P, 5)));
      expect((await completion.createChatCompletion({ params: hi }, call)).choices[0]?.content).toBe("aaaaa");
      expect(await balance()).toEqual({ spent: extractCost(P, 5), reserved: 0 });
      expect(await records()).toHaveLength(1);
    });
  });

  it("never passes the cap under many concurrent calls, and charges only what it records", async () => {
    const { completion, newAccount } = setup();
    const cap = 100;
    const { call, balance, records } = await newAccount(BigInt(cap));
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, () => completion.createChatCompletion({ params: { ...hi, maxTokens: 5n } }, call)),
    );
    const ok = results.filter((r) => r.status === "fulfilled").length;
    expect(ok).toBe(Math.floor(cap / extractCost(P, 5)));
    for (const r of results)
      if (r.status === "rejected")
        expect(ConnectError.from(r.reason).findDetails(ErrorInfoSchema)[0]?.reason).toBe("spend_cap_exceeded");
    const end = await balance();
    expect(end).toEqual({ spent: ok * extractCost(P, 5), reserved: 0 });
    expect(end.spent).toBeLessThanOrEqual(cap);
    expect(await records()).toHaveLength(ok);
  });
});
