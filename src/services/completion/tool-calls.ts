import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/** The most tool calls one answer may carry; a larger `index` from an engine is refused. */
export const MAX_TOOL_CALLS = 128;

const isObject = (v: JsonValue | undefined): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: JsonValue | undefined): string | undefined => (typeof v === "string" ? v : undefined);

/**
 * Merges streamed tool-call fragments (OpenAI `delta.tool_calls`: `{index, id?, type?,
 * function: {name?, arguments?}}`) into whole tool calls, the way OpenAI clients do, so a
 * unary answer carries complete calls whatever shape the engine produced them in. Indexes
 * need not start at 0 or be dense (some servers start at 1): `slots` maps each index to its
 * place in `calls`, in order of first appearance.
 */
export function mergeToolCallDeltas(
  calls: JsonObject[],
  deltas: readonly JsonValue[],
  slots: Map<number, number>,
): void {
  for (const delta of deltas) {
    if (!isObject(delta)) continue;
    const index = typeof delta.index === "number" ? delta.index : -1 - calls.length;
    let slot = slots.get(index);
    if (slot === undefined) {
      if (calls.length >= MAX_TOOL_CALLS) throw new RangeError(`more than ${MAX_TOOL_CALLS} tool calls`);
      slot = calls.length;
      slots.set(index, slot);
      calls.push({ id: "", type: "function", function: { name: "", arguments: "" } });
    }
    const call = calls[slot];
    if (!call) continue;
    const id = str(delta.id);
    const type = str(delta.type);
    if (id) call.id = id;
    if (type) call.type = type;
    const fn = isObject(delta.function) ? delta.function : undefined;
    const target = isObject(call.function) ? call.function : {};
    const name = str(fn?.name);
    const args = str(fn?.arguments);
    if (name) target.name = `${str(target.name) ?? ""}${name}`;
    if (args) target.arguments = `${str(target.arguments) ?? ""}${args}`;
    call.function = target;
  }
}
