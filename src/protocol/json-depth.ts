/**
 * How deeply JSON may nest. A leaf module: the edge refuses deep bodies before it translates
 * them, and the core refuses the same values from its own callers.
 */

/**
 * The deepest JSON a Struct or Value field (tools, tool calls, tool_choice, response_format)
 * may hold. Each JSON level costs protobuf two message levels and protobuf decoders stop at
 * 100, so a value nested about 50 levels could not even cross a gRPC hop (it failed as a 500);
 * deeper values would also only exhaust recursive code paths (token counting stringifies them).
 */
export const MAX_STRUCT_DEPTH = 32;

/** The deepest request body the edge parses; deeper ones would only exhaust recursive code paths. */
export const MAX_BODY_DEPTH = 64;

/** Whether a JSON value nests at most `max` levels (an object or an array is one), without recursion. */
export function nestsWithin(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (typeof v !== "object" || v === null) continue;
    if (depth > max) return false;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return true;
}
