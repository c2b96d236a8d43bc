import { create, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ChatParamsSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { reasonOf } from "../../errors/catalogue.ts";
import { MAX_STRUCT_DEPTH } from "../../protocol/json-depth.ts";
import { validateChatParams } from "./validate.ts";

const messages = [{ role: "user", content: "hi" }];

/** The reason and field of a refusal, or "ok". */
function outcomeOf(params: Parameters<typeof create<typeof ChatParamsSchema>>[1]): string {
  try {
    validateChatParams(create(ChatParamsSchema, params));
    return "ok";
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    return `${reasonOf(err)} ${err.rawMessage.split(":")[0]}`;
  }
}

/** A JSON object nesting `depth` levels (the object itself is one). */
const nestedObject = (depth: number): JsonObject => {
  let v: JsonObject = { leaf: 1 };
  for (let i = 1; i < depth; i++) v = { a: v };
  return v;
};

describe("validateChatParams", () => {
  // Fuzzing (issue 7): a binary caller can send a google.protobuf.Value with no kind, or a NaN;
  // toJson throws on both, and the call answered 500 internal_error instead of 400.
  it.each([
    ["a Value with no kind", create(ValueSchema)],
    ["a NaN number", create(ValueSchema, { kind: { case: "numberValue", value: Number.NaN } })],
    ["an infinite number", create(ValueSchema, { kind: { case: "numberValue", value: Number.POSITIVE_INFINITY } })],
  ])("refuses a tool_choice that is %s as invalid_request_body", (_what, toolChoice) => {
    expect(outcomeOf({ messages, toolChoice })).toBe("invalid_request_body toolChoice");
  });

  it("still takes a string or an object tool_choice", () => {
    expect(
      outcomeOf({ messages, toolChoice: create(ValueSchema, { kind: { case: "stringValue", value: "auto" } }) }),
    ).toBe("ok");
  });

  it("refuses JSON fields nesting deeper than MAX_STRUCT_DEPTH, as the edge does; accepts them at the limit", () => {
    expect(outcomeOf({ messages, responseFormat: nestedObject(MAX_STRUCT_DEPTH + 1) })).toBe(
      "invalid_request_body responseFormat",
    );
    expect(outcomeOf({ messages, tools: [nestedObject(MAX_STRUCT_DEPTH + 1)] })).toMatch(/^invalid_request_body tools/);
    expect(
      outcomeOf({ messages, responseFormat: nestedObject(MAX_STRUCT_DEPTH), tools: [nestedObject(MAX_STRUCT_DEPTH)] }),
    ).toBe("ok");
  });
});
