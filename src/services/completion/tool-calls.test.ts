import type { JsonObject } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MAX_TOOL_CALLS, mergeToolCallDeltas } from "./tool-calls.ts";

describe("mergeToolCallDeltas", () => {
  it("joins streamed fragments by index into whole calls", () => {
    const calls: JsonObject[] = [];
    const slots = new Map<number, number>();
    mergeToolCallDeltas(
      calls,
      [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }],
      slots,
    );
    mergeToolCallDeltas(
      calls,
      [
        { index: 0, function: { arguments: '{"city":' } },
        { index: 1, id: "call_b", function: { name: "now", arguments: "{}" } },
      ],
      slots,
    );
    mergeToolCallDeltas(calls, [{ index: 0, function: { arguments: '"Oslo"}' } }], slots);
    expect(calls).toEqual([
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
      { id: "call_b", type: "function", function: { name: "now", arguments: "{}" } },
    ]);
  });

  it("takes whole calls without an index in order, and ignores non-objects", () => {
    const calls: JsonObject[] = [];
    mergeToolCallDeltas(
      calls,
      ["junk", { id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
      new Map(),
    );
    expect(calls).toEqual([{ id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } }]);
  });

  it("packs sparse or late-starting indexes densely, as some servers start at 1", () => {
    const calls: JsonObject[] = [];
    const slots = new Map<number, number>();
    mergeToolCallDeltas(calls, [{ index: 1, id: "c1", function: { name: "f", arguments: "{" } }], slots);
    mergeToolCallDeltas(
      calls,
      [
        { index: 30_000_000, id: "c2", function: { name: "g", arguments: "{}" } },
        { index: 1, function: { arguments: "}" } },
      ],
      slots,
    );
    expect(calls).toEqual([
      { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
      { id: "c2", type: "function", function: { name: "g", arguments: "{}" } },
    ]);
  });

  it("refuses more tool calls than an answer may carry", () => {
    const calls: JsonObject[] = [];
    const many = Array.from({ length: MAX_TOOL_CALLS + 1 }, (_, index) => ({ index, function: { name: "f" } }));
    expect(() => mergeToolCallDeltas(calls, many, new Map())).toThrow(RangeError);
  });
});
