import { describe, expect, it } from "vitest";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineDelta, EngineEvent, EngineMessage, EngineRequest } from "../engine.ts";
import { createTokenizer } from "../tokenizer.ts";
import { composeAnswer, EMPTY_ANSWER } from "./answer.ts";
import { createExtractiveEngine } from "./index.ts";

const tokenizer = createTokenizer();
const engine = createExtractiveEngine({ tokenizer });

interface Run {
  text: string;
  deltas: EngineDelta[];
  events: EngineEvent[];
  finishReason: FinishReason | undefined;
}

function request(messages: EngineMessage[], extra: Partial<EngineRequest> = {}): EngineRequest {
  return { model: "service-extract", messages, maxTokens: 4096, stop: [], ...extra };
}

async function run(req: EngineRequest, signal: AbortSignal = new AbortController().signal): Promise<Run> {
  const events: EngineEvent[] = [];
  for await (const event of engine.generate(req, signal)) events.push(event);
  const deltas = events.filter((e): e is EngineDelta => e.type === "delta");
  const done = events.find((e) => e.type === "done");
  return {
    text: deltas.map((d) => d.text).join(""),
    deltas,
    events,
    finishReason: done?.type === "done" ? done.finishReason : undefined,
  };
}

const sumTokens = (deltas: readonly EngineDelta[]): number => deltas.reduce((s, d) => s + d.tokens, 0);

const CAR: EngineMessage[] = [
  { role: "system", content: "You are a helpful assistant. Answer briefly and politely." },
  {
    role: "user",
    content:
      "My garden has tomatoes and basil. Cold weather drains a car battery quickly. " +
      "The museum opens at nine on weekdays. I painted the kitchen blue last spring.",
  },
  { role: "assistant", content: "Noted. A weak battery is the usual reason a car will not start in winter." },
  { role: "user", content: "Why does my car battery die in cold weather?" },
];

describe("extractive engine", () => {
  it("is ready at once", async () => {
    await expect(engine.ready()).resolves.toBeUndefined();
  });

  it("answers with the sentences about the question's topic, not unrelated ones", async () => {
    const { text, finishReason } = await run(request(CAR));
    expect(text).toContain("Cold weather drains a car battery quickly.");
    expect(text).toContain("A weak battery is the usual reason a car will not start in winter.");
    expect(text).not.toContain("tomatoes");
    expect(text).not.toContain("museum");
    expect(text).not.toContain("kitchen");
    expect(text).not.toContain("Why does my car");
    expect(finishReason).toBe(FinishReason.STOP);
  });

  it("keeps the chosen sentences in their original order", async () => {
    const messages: EngineMessage[] = [
      {
        role: "user",
        content:
          "Volcanoes are noisy. The dog sleeps all day. " +
          "Volcanoes erupt lava, ash and volcanic gas when magma pressure rises under the crust.",
      },
      { role: "user", content: "How do volcanoes erupt lava and ash when magma pressure rises?" },
    ];
    const { text } = await run(request(messages));
    // The second sentence scores higher, yet the first one still comes first.
    expect(text).toBe(
      "Volcanoes are noisy. Volcanoes erupt lava, ash and volcanic gas when magma pressure rises under the crust.",
    );
  });

  it("uses the only message's own sentences when there is nothing else", async () => {
    const content =
      "Rust has a borrow checker. Python is dynamic. Go has goroutines. Java runs on a VM. " +
      "C has pointers. Zig has comptime. Haskell is lazy. Summarise these languages.";
    const { text } = await run(request([{ role: "user", content }]));
    const sentences = text.split(/(?<=\.) /);
    expect(sentences.length).toBeGreaterThan(0);
    expect(sentences.length).toBeLessThanOrEqual(5);
    for (const s of sentences) expect(content).toContain(s);
  });

  it("is deterministic at temperature 0 and when temperature is undefined", async () => {
    const first = await run(request(CAR, { temperature: 0 }));
    const again = await run(request(CAR, { temperature: 0, seed: 7n }));
    const byDefault = await run(request(CAR));
    expect(again.text).toBe(first.text);
    expect(byDefault.text).toBe(first.text);
    expect(again.deltas).toEqual(first.deltas);
  });

  describe("sampling", () => {
    const topics = [
      "fuel",
      "orbit",
      "launch pad",
      "crew",
      "engines",
      "weather",
      "telemetry",
      "heat shield",
      "payload",
      "countdown",
      "booster",
      "recovery ship",
    ];
    const many: EngineMessage[] = [
      { role: "user", content: topics.map((t, i) => `Rocket note ${i + 1} covers the ${t}.`).join(" ") },
      { role: "user", content: "What do the rocket notes say?" },
    ];

    it("repeats the answer for the same seed and parameters", async () => {
      const a = await run(request(many, { temperature: 1.2, topP: 0.9, seed: 42n }));
      const b = await run(request(many, { temperature: 1.2, topP: 0.9, seed: 42n }));
      expect(a.text.length).toBeGreaterThan(0);
      expect(b.text).toBe(a.text);
    });

    it("varies the answer across seeds", async () => {
      const outputs = new Set<string>();
      for (let seed = 1n; seed <= 8n; seed++) {
        outputs.add((await run(request(many, { temperature: 1.5, seed }))).text);
      }
      expect(outputs.size).toBeGreaterThanOrEqual(2);
    });

    it("still keeps sampled sentences in their original order", async () => {
      const { text } = await run(request(many, { temperature: 1.5, seed: 3n }));
      const numbers = [...text.matchAll(/note (\d+)/g)].map((m) => Number(m[1]));
      expect(numbers.length).toBeGreaterThan(1);
      expect(numbers).toEqual([...numbers].sort((x, y) => x - y));
    });

    it("behaves as greedy when top_p leaves a single candidate", async () => {
      const greedy = await run(request(CAR, { temperature: 0 }));
      const nucleus = await run(request(CAR, { temperature: 1, topP: 0.01, seed: 5n }));
      expect(nucleus.text).toBe(greedy.text);
    });
  });

  it("cuts before the first stop string with STOP", async () => {
    const full = await run(request(CAR));
    const { text, finishReason } = await run(request(CAR, { stop: ["zzz", "battery"] }));
    expect(finishReason).toBe(FinishReason.STOP);
    expect(text).not.toContain("battery");
    expect(text).toBe(full.text.slice(0, full.text.indexOf("battery")));
  });

  it("cuts at max_tokens with LENGTH and exactly that many tokens", async () => {
    const full = await run(request(CAR));
    const { text, deltas, finishReason } = await run(request(CAR, { maxTokens: 5 }));
    expect(finishReason).toBe(FinishReason.LENGTH);
    expect(sumTokens(deltas)).toBe(5);
    expect(deltas).toHaveLength(5);
    expect(full.text.startsWith(text)).toBe(true);
    expect(tokenizer.count(text)).toBe(5);
  });

  it("lets whichever of stop and max_tokens comes first win", async () => {
    const full = await run(request(CAR));
    const stop = "winter";
    const beforeStop = tokenizer.count(full.text.slice(0, full.text.indexOf(stop)));
    const stopFirst = await run(request(CAR, { stop: [stop], maxTokens: beforeStop + 3 }));
    expect(stopFirst.finishReason).toBe(FinishReason.STOP);
    expect(stopFirst.text).not.toContain(stop);
    const lengthFirst = await run(request(CAR, { stop: [stop], maxTokens: beforeStop - 3 }));
    expect(lengthFirst.finishReason).toBe(FinishReason.LENGTH);
    expect(sumTokens(lengthFirst.deltas)).toBe(beforeStop - 3);
  });

  it("falls back to a lead summary when nothing matches the question", async () => {
    const messages: EngineMessage[] = [
      { role: "system", content: "Tea grows on hillsides. It is picked by hand." },
      { role: "assistant", content: "Silk comes from moths. It is spun into thread." },
      { role: "user", content: "Explain quantum chromodynamics." },
    ];
    const { text, finishReason } = await run(request(messages));
    expect(text).toBe("Tea grows on hillsides. Silk comes from moths.");
    expect(finishReason).toBe(FinishReason.STOP);
    const onlyStopwords = await run(request([...messages.slice(0, 2), { role: "user", content: "What is it?" }]));
    expect(onlyStopwords.text).toBe(text);
    const lone = await run(
      request([
        { role: "user", content: "Alpha one. Beta two. Gamma three. Delta four." },
        { role: "user", content: "Huh?" },
      ]),
    );
    expect(lone.text).toBe("Alpha one. Beta two. Gamma three.");
  });

  it("answers a fixed non-empty sentence when there is no text at all", async () => {
    const { text, finishReason } = await run(request([{ role: "user", content: "   " }]));
    expect(text).toBe(EMPTY_ANSWER);
    expect(finishReason).toBe(FinishReason.STOP);
  });

  it("streams token-sized deltas that concatenate to the whole answer", async () => {
    const answer = composeAnswer(CAR, { temperature: 0, topP: 1, seed: undefined });
    const { text, deltas, events } = await run(request(CAR));
    expect(text).toBe(answer);
    expect(deltas.length).toBeGreaterThan(10);
    expect(deltas.every((d) => d.tokens === 1 && d.text.length > 0)).toBe(true);
    expect(sumTokens(deltas)).toBe(tokenizer.count(answer));
    expect(events[events.length - 1]?.type).toBe("done");
  });

  it("stops early, without done, when aborted", async () => {
    const controller = new AbortController();
    const events: EngineEvent[] = [];
    for await (const event of engine.generate(request(CAR), controller.signal)) {
      events.push(event);
      if (events.length === 3) controller.abort();
    }
    expect(events).toHaveLength(3);
    expect(events.some((e) => e.type === "done")).toBe(false);

    const aborted = new AbortController();
    aborted.abort();
    expect((await run(request(CAR), aborted.signal)).events).toEqual([]);
  });

  describe("multi-byte text", () => {
    const messages: EngineMessage[] = [
      { role: "user", content: "Party 🎉🎉 time with 🎉 balloons 😀. 猫很可爱。Nothing else." },
      { role: "user", content: "Tell me about the party balloons and 猫" },
    ];

    it("round-trips emoji and CJK through the deltas", async () => {
      const answer = composeAnswer(messages, { temperature: 0, topP: 1, seed: undefined });
      expect(answer).toContain("🎉");
      expect(answer).toContain("猫很可爱。");
      const { text, deltas } = await run(request(messages));
      expect(text).toBe(answer);
      expect(deltas.some((d) => d.text.includes("\uFFFD"))).toBe(false);
      expect(deltas.some((d) => d.tokens > 1)).toBe(true);
      expect(sumTokens(deltas)).toBe(tokenizer.encode(answer).length);
    });

    it("never ends a LENGTH answer in a broken character", async () => {
      const tokens = tokenizer.encode(composeAnswer(messages, { temperature: 0, topP: 1, seed: undefined }));
      for (let maxTokens = 1; maxTokens < 12; maxTokens++) {
        const { text, deltas, finishReason } = await run(request(messages, { maxTokens }));
        expect(finishReason).toBe(maxTokens < tokens.length ? FinishReason.LENGTH : FinishReason.STOP);
        expect(text).not.toContain("\uFFFD");
        expect(sumTokens(deltas)).toBeLessThanOrEqual(maxTokens);
        expect(sumTokens(deltas)).toBeGreaterThanOrEqual(maxTokens - 1);
      }
      // The tokenizer's shared streaming decoder must be left clean for its next user.
      expect(tokenizer.decode(tokenizer.encode("x🎉🎉"))).toBe("x🎉🎉");
    });
  });
});
