import type { JsonObject } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { mergeToolCallDeltas } from "./tool-calls.ts";

describe("mergeToolCallDeltas", () => {
  it("joins streamed fragments by index into whole calls", () => {
    const calls: JsonObject[] = [];
    mergeToolCallDeltas(calls, [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }]);
    mergeToolCallDeltas(calls, [{ index: 0, function: { arguments: "{\"city\":" } }, { index: 1, id: "call_b", function: { name: "now", arguments: "{}" } }]);
    mergeToolCallDeltas(calls, [{ index: 0, function: { arguments: "\"Oslo\"}" } }]);
    expect(calls).toEqual([
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } },
      { id: "call_b", type: "function", function: { name: "now", arguments: "{}" } },
    ]);
  });

  it("takes whole calls without an index in order, and ignores non-objects", () => {
    const calls: JsonObject[] = [];
    mergeToolCallDeltas(calls, ["junk", { id: "c1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]);
    expect(calls).toEqual([{ id: "c1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]);
  });

  it("refuses an index out of order instead of building a huge sparse array", () => {
    const calls: JsonObject[] = [];
    expect(() => mergeToolCallDeltas(calls, [{ index: 30_000_000, function: { name: "f" } }])).toThrow(RangeError);
    expect(() => mergeToolCallDeltas(calls, [{ index: -1 }])).toThrow(RangeError);
    expect(calls).toHaveLength(0);
  });
});
