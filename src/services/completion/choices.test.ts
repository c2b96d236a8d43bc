import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { createExtractiveEngine } from "../../engines/extractive/index.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

const tokenizer = createTokenizer();

async function setup(capUsdMicros = 10_000_000n) {
  const { completion, newAccount, account } = createCoreFixture({
    engine: createExtractiveEngine({ tokenizer }),
    tokenizer,
  });
  const { accountId, call } = await newAccount({ capUsdMicros, burst: 100 });
  const spent = async () => Number((await account(accountId))?.spentUsdMicros);
  return { completion, call, spent };
}

const conversation = [
  {
    role: "system",
    content:
      "Rivers carry water to the sea. Dams hold water back. Sluices let water through in measured amounts. " +
      "Mills use the flow of water. Canals connect rivers.",
  },
  { role: "user", content: "How does water move through a sluice and a canal?" },
];

describe("n choices", () => {
  it("answers n choices, seeded per choice, and bills the tokens of all of them", async () => {
    const { completion, call, spent } = await setup();
    const params = { messages: conversation, n: 3, temperature: 1.5, seed: 7n };
    const out = await completion.createChatCompletion({ params }, call);
    expect(out.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(out.choices.every((c) => c.content.length > 0 && c.finishReason === FinishReason.STOP)).toBe(true);
    const tokens = out.choices.reduce((sum, c) => sum + tokenizer.count(c.content), 0);
    expect(Number(out.usage?.completionTokens)).toBe(tokens);
    expect(await spent()).toBe(Number(out.usage?.promptTokens) + 2 * tokens);
    const again = await completion.createChatCompletion({ params }, call);
    expect(again.choices.map((c) => c.content)).toEqual(out.choices.map((c) => c.content));
  });

  it("streams every choice with its index and its own finish", async () => {
    const { completion, call } = await setup();
    const text = new Map<number, string>();
    const finished: number[] = [];
    for await (const e of completion.streamChatCompletion({ params: { messages: conversation, n: 2 } }, call)) {
      if (e.event.case === "delta") text.set(e.choiceIndex, (text.get(e.choiceIndex) ?? "") + e.event.value);
      if (e.event.case === "finishReason") finished.push(e.choiceIndex);
    }
    expect([...text.keys()].sort()).toEqual([0, 1]);
    expect(finished).toEqual([0, 1]);
    // At temperature 0 every choice is the same answer.
    expect(text.get(0)).toBe(text.get(1));
  });

  it("bills choices against the cap: room for one answer is not room for eight", async () => {
    const prompt = tokenizer.countMessages(conversation, 32_768) ?? 0;
    // Room for the prompt with two answers of 4 tokens (2 micros per output token), not eight.
    const { completion, call, spent } = await setup(BigInt(prompt + 2 * 4 * 2));
    await expectFailure(
      () => completion.createChatCompletion({ params: { messages: conversation, maxTokens: 4n, n: 8 } }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(await spent()).toBe(0);
    const two = await completion.createChatCompletion(
      { params: { messages: conversation, maxTokens: 4n, n: 2 } },
      call,
    );
    expect(two.choices).toHaveLength(2);
    expect(await spent()).toBe(prompt + 2 * 8);
  });
});
