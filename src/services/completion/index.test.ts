import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { FinishReason, type ChatParamsSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineRequest } from "../../engines/engine.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { createCoreFixture } from "../../testing/core-fixture.ts";
import { drain } from "../../testing/drain.ts";
import { countingEngine, modelsServing } from "../../testing/engines.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/**
 * CompletionService's answers: unary and streamed, what the engine is asked, and the request
 * checks. Its refusals (account, model, size, cap) are in refusals.test.ts.
 */

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const tokenizer = createTokenizer();
const HI_PROMPT_TOKENS = 7;

type Params = MessageInitShape<typeof ChatParamsSchema>;
const hi: Params = { messages: [{ role: "user", content: "hi" }] };

/** A core over a memory store: service-extract yields five "a"s, beside any `engines` by name. */
function setup(engines: Record<string, Engine> = {}) {
  const all: Record<string, Engine> = { "service-extract": countingEngine(5), ...engines };
  const fixture = createCoreFixture({
    models: modelsServing(Object.entries(all).map(([name, engine]) => ({ name, engine }))),
    tokenizer,
    now: () => NOW,
  });
  const newAccount = () => fixture.newAccount({ burst: 1_000 });
  return { completion: fixture.completion, newAccount };
}

describe("CompletionService", () => {
  it("answers a unary call with the content, the finish reason and the usage", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const res = await completion.createChatCompletion({ params: hi }, call);
    expect(res.id).toMatch(/^chatcmpl-[A-Za-z0-9]+$/);
    expect(res.model).toBe("service-extract");
    expect(res.created).toBe(BigInt(Math.floor(NOW / 1000)));
    expect(res.choices[0]?.content).toBe("aaaaa");
    expect(res.choices[0]?.finishReason).toBe(FinishReason.STOP);
    expect(res.usage).toMatchObject({
      promptTokens: BigInt(HI_PROMPT_TOKENS),
      completionTokens: 5n,
      totalTokens: BigInt(HI_PROMPT_TOKENS + 5),
    });
  });

  it("streams deltas, then the finish reason, then the usage, all under one id", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const events = await drain(completion.streamChatCompletion({ params: hi }, call));
    expect(events.map((e) => e.event.case)).toEqual([
      "delta",
      "delta",
      "delta",
      "delta",
      "delta",
      "finishReason",
      "usage",
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(1);
    expect(events[0]?.id).toMatch(/^chatcmpl-/);
    expect(
      events
        .filter((e) => e.event.case === "delta")
        .map((e) => e.event.value)
        .join(""),
    ).toBe("aaaaa");
    expect(events[5]?.event.value).toBe(FinishReason.STOP);
    expect(events[6]?.event).toMatchObject({
      case: "usage",
      value: { promptTokens: 7n, completionTokens: 5n, totalTokens: 12n },
    });
  });

  it("reads a prompt as one user message", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const res = await completion.createChatCompletion({ params: { prompt: "hi" } }, call);
    expect(res.usage?.promptTokens).toBe(BigInt(HI_PROMPT_TOKENS));
  });

  it("clamps max_tokens to 4096 when missing, zero, negative or higher", async () => {
    const seen: EngineRequest[] = [];
    const { completion, newAccount } = setup({ "service-extract": countingEngine(1, seen) });
    const { call } = await newAccount();
    for (const maxTokens of [undefined, 0n, -5n, 4097n, 1_000_000n, 4096n, 3n]) {
      await completion.createChatCompletion({ params: { ...hi, ...(maxTokens !== undefined && { maxTokens }) } }, call);
    }
    expect(seen.map((r) => r.maxTokens)).toEqual([4096, 4096, 4096, 4096, 4096, 4096, 3]);
  });

  it("passes sampling parameters to the engine", async () => {
    const seen: EngineRequest[] = [];
    const { completion, newAccount } = setup({ "service-extract": countingEngine(1, seen) });
    const { call } = await newAccount();
    await completion.createChatCompletion(
      { params: { ...hi, temperature: 0.5, topP: 0.9, stop: ["x"], seed: 4n } },
      call,
    );
    expect(seen[0]).toMatchObject({ model: "service-extract", temperature: 0.5, topP: 0.9, stop: ["x"], seed: 4n });
  });

  it("lists the served models", async () => {
    const { completion, newAccount } = setup({ other: countingEngine(1) });
    const { call } = await newAccount();
    const { models } = await completion.listModels({}, call);
    expect(models.map((m) => m.id).sort()).toEqual(["other", "service-extract"]);
  });

  it("refuses a call without a bearer token, unary and streaming", async () => {
    const { completion } = setup();
    await expectFailure(
      () => completion.createChatCompletion({ params: hi }),
      Code.Unauthenticated,
      "missing_bearer_token",
    );
    await expectFailure(
      () => drain(completion.streamChatCompletion({ params: hi })),
      Code.Unauthenticated,
      "missing_bearer_token",
    );
  });

  describe("validation", () => {
    const cases: [string, Params, string][] = [
      ["no messages and no prompt", {}, "messages"],
      ["temperature 3", { ...hi, temperature: 3 }, "temperature"],
      ["n 9", { ...hi, n: 9 }, "n"],
      ["n 0", { ...hi, n: 0 }, "n"],
      ["both prompt and messages", { ...hi, prompt: "hi" }, "prompt"],
      ["top_p 1.5", { ...hi, topP: 1.5 }, "topP"],
      ["five stop strings", { ...hi, stop: ["a", "b", "c", "d", "e"] }, "stop"],
      ["an unknown role", { messages: [{ role: "robot", content: "hi" }] }, "messages.0.role"],
    ];
    it.each(cases)("refuses %s with invalid_request_body", async (_name, params, field) => {
      const { completion, newAccount } = setup();
      const { call } = await newAccount();
      const err = await expectFailure(
        () => completion.createChatCompletion({ params }, call),
        Code.InvalidArgument,
        "invalid_request_body",
      );
      expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.field).toBe(field);
      await expectFailure(
        () => drain(completion.streamChatCompletion({ params }, call)),
        Code.InvalidArgument,
        "invalid_request_body",
      );
    });
  });
});
