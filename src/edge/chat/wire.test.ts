import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { CreateChatCompletionRequestSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { MAX_STRUCT_DEPTH } from "../../protocol/json-depth.ts";
import { fromWire } from "./wire.ts";

/** A JSON object nesting `depth` levels (the object itself is one). */
const nestedObject = (depth: number): Record<string, unknown> => {
  let v: Record<string, unknown> = { leaf: 1 };
  for (let i = 1; i < depth; i++) v = { a: v };
  return v;
};

describe("fromWire", () => {
  it("translates the OpenAI request shape into ChatParams", () => {
    const out = fromWire({
      model: "service-extract",
      messages: [
        { role: "system", content: "S" },
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
          name: "u1",
        },
      ],
      stream: true,
      max_tokens: 12,
      temperature: 0.5,
      top_p: 0.9,
      stop: "\n",
      seed: 7,
      user: "end-user",
      n: 1,
      presence_penalty: 0.1,
      frequency_penalty: -0.1,
      unknown_field: { kept: false },
    });
    if ("field" in out) throw new Error(out.message);
    expect(out.stream).toBe(true);
    expect(out.params).toEqual({
      model: "service-extract",
      messages: [
        { role: "system", content: "S" },
        { role: "user", content: "a\nb", name: "u1" },
      ],
      maxTokens: 12n,
      temperature: 0.5,
      topP: 0.9,
      stop: ["\n"],
      seed: 7n,
      user: "end-user",
      n: 1,
      presencePenalty: 0.1,
      frequencyPenalty: -0.1,
    });
  });

  it.each([[0], [-5], [1.5], ["12"], [null], [1e20]])(
    "leaves max_tokens %j unset, which the core reads as 4,096",
    (value) => {
      const out = fromWire({ messages: [], max_tokens: value });
      if ("field" in out) throw new Error(out.message);
      expect(out.params.maxTokens).toBeUndefined();
    },
  );

  it("falls back to max_completion_tokens", () => {
    const out = fromWire({ messages: [], max_completion_tokens: 9 });
    if ("field" in out) throw new Error(out.message);
    expect(out.params.maxTokens).toBe(9n);
  });

  it.each([
    [{ messages: "hi" }, "messages"],
    [{ messages: [{ role: "user", content: 5 }] }, "messages.0.content"],
    [{ messages: [], temperature: "hot" }, "temperature"],
    [{ messages: [], stream: "yes" }, "stream"],
    [{ messages: [], stop: [1] }, "stop"],
    [{ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, "messages.0.content"],
  ])("names the field of a type error: %j", (body, field) => {
    const out = fromWire(body);
    expect("field" in out && out.field.startsWith(field)).toBe(true);
  });

  it("treats null like absent, as OpenAI clients send it", () => {
    const out = fromWire({
      messages: [{ role: "assistant", content: null }],
      temperature: null,
      stop: null,
      stream: null,
    });
    if ("field" in out) throw new Error(out.message);
    expect(out.stream).toBe(false);
    expect(out.params.messages).toEqual([{ role: "assistant", content: "" }]);
    expect(out.params.stop).toEqual([]);
  });

  // Fuzzing (issue 7) found a tool schema nested 50 levels answered 500: the edge accepted it
  // (its body limit is 64 levels) but the message could not be decoded on the core side,
  // where protobuf stops at 100 message levels and each JSON level costs two.
  it.each([
    ["tools", (v: Record<string, unknown>) => ({ tools: [v] })],
    ["tool_choice", (v: Record<string, unknown>) => ({ tool_choice: v })],
    ["response_format", (v: Record<string, unknown>) => ({ response_format: v })],
    [
      "messages.0.tool_calls",
      (v: Record<string, unknown>) => ({ messages: [{ role: "assistant", content: "", tool_calls: [v] }] }),
    ],
  ])("refuses %s nesting deeper than MAX_STRUCT_DEPTH as a field error, and accepts it at the limit", (field, body) => {
    const deep = fromWire({ messages: [{ role: "user", content: "hi" }], ...body(nestedObject(MAX_STRUCT_DEPTH + 1)) });
    expect("field" in deep && deep.field.startsWith(field)).toBe(true);
    const atLimit = fromWire({ messages: [{ role: "user", content: "hi" }], ...body(nestedObject(MAX_STRUCT_DEPTH)) });
    if ("field" in atLimit) throw new Error(atLimit.message);
    const bytes = toBinary(
      CreateChatCompletionRequestSchema,
      create(CreateChatCompletionRequestSchema, { params: atLimit.params }),
    );
    expect(() => fromBinary(CreateChatCompletionRequestSchema, bytes)).not.toThrow();
  });
});
