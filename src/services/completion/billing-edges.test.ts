import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineEvent } from "../../engines/engine.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

const tokenizer = createTokenizer();

/** A core whose only model (service-extract prices: 1 and 2 micros per token) yields `events`. */
async function setup(events: EngineEvent[], capUsdMicros: bigint) {
  const engine: Engine = {
    async *generate() {
      yield* events;
    },
    ready: async () => undefined,
  };
  const { completion, newAccount, account } = createCoreFixture({ engine, tokenizer });
  const { accountId, call } = await newAccount({ capUsdMicros, burst: 100 });
  const balance = async () => {
    const a = await account(accountId);
    return { spent: Number(a?.spentUsdMicros), reserved: Number(a?.reservedUsdMicros) };
  };
  return { completion, call, balance };
}

const hi = { messages: [{ role: "user", content: "hi" }] };
const HI_PROMPT = 7;

describe("billing edges", () => {
  it("refuses a stream whose first delta does not fit, with a 402 and no charge", async () => {
    // The cap covers the prompt and one output token, not a first delta of five tokens.
    const { completion, call, balance } = await setup(
      [
        { type: "delta", text: "abcde", tokens: 5 },
        { type: "done", finishReason: FinishReason.STOP },
      ],
      BigInt(HI_PROMPT + 2),
    );
    await expectFailure(
      async () => {
        for await (const _ of completion.streamChatCompletion({ params: hi }, call)) {
          /* drain */
        }
      },
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(await balance()).toEqual({ spent: 0, reserved: 0 });
  });

  it("counts tool definitions as input: too many of them is input_too_large", async () => {
    const { completion, call, balance } = await setup([{ type: "done", finishReason: FinishReason.STOP }], 10_000_000n);
    const tool = {
      type: "function",
      function: { name: "f", description: "word ".repeat(40_000), parameters: { type: "object" } },
    };
    await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, tools: [tool] } }, call),
      Code.InvalidArgument,
      "input_too_large",
    );
    expect(await balance()).toEqual({ spent: 0, reserved: 0 });
  });

  it("bills tool definitions as prompt tokens", async () => {
    const { completion, call } = await setup(
      [
        { type: "delta", text: "ok", tokens: 1 },
        { type: "done", finishReason: FinishReason.STOP },
      ],
      10_000_000n,
    );
    const tool = { type: "function", function: { name: "get_weather", parameters: { type: "object" } } };
    const out = await completion.createChatCompletion({ params: { ...hi, tools: [tool] } }, call);
    expect(Number(out.usage?.promptTokens)).toBe(HI_PROMPT + tokenizer.count(JSON.stringify([tool])));
  });

  it.each([
    ["negative", { promptTokens: -1000, completionTokens: 1 }],
    ["fractional", { promptTokens: 3, completionTokens: 1.5 }],
    ["no-output-after-output", { promptTokens: 3, completionTokens: 0 }],
  ])("ignores a %s upstream usage and bills from its own count", async (_what, usage) => {
    const { completion, call, balance } = await setup(
      [
        { type: "delta", text: "ok", tokens: 1 },
        { type: "done", finishReason: FinishReason.STOP, usage },
      ],
      10_000_000n,
    );
    const out = await completion.createChatCompletion({ params: hi }, call);
    expect(out.usage).toMatchObject({ promptTokens: BigInt(HI_PROMPT), completionTokens: 1n });
    expect(await balance()).toEqual({ spent: HI_PROMPT + 2, reserved: 0 });
  });
});
