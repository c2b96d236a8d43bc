import { create, fromJson, toBinary, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import {
  ChatParamsSchema,
  CreateChatCompletionRequestSchema,
} from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { mutate, mutationArb, stringArb, type Mutation } from "./json-text.ts";

/**
 * Arbitraries for Connect binary (`application/proto`) request bodies: a `ChatParams` built
 * through protobuf-es, then hostile fields no encoder writes (invalid UTF-8, wrong wire types,
 * open groups, Values without a kind, deep nesting, unknown numbers), then byte mutations
 * (truncation, flips, junk) that leave anything from a valid message to random bytes.
 */

type ParamsInit = MessageInitShape<typeof ChatParamsSchema>;

/** A field no protobuf encoder writes, appended inside `ChatParams` or the request itself. */
export type ExtraField =
  | { t: "unknown"; no: number; wire: "varint" | "len" | "i64" | "i32" }
  | { t: "wrong-wire"; no: number; wire: "varint" | "len" | "i64" | "i32" }
  | { t: "invalid-utf8"; no: 1 | 3 | 9 }
  | { t: "message-invalid-utf8"; role: boolean }
  | { t: "group"; no: number; closed: boolean }
  | { t: "empty-value" }
  | { t: "nan-value" }
  | { t: "deep-value"; depth: number }
  | { t: "struct-empty-value" };

/** A binary body, as data, so a counterexample prints what was sent and why. */
export interface BinaryBody {
  params: ParamsInit | "absent";
  extras: ExtraField[];
  outer: ExtraField[];
  mutations: Mutation[];
}

const opt = <T>(arb: fc.Arbitrary<T>, p: number): fc.Arbitrary<T | undefined> =>
  fc.oneof(
    { weight: Math.round((1 - p) * 100), arbitrary: fc.constant(undefined) },
    { weight: Math.round(p * 100), arbitrary: arb },
  );
const jsonObjectArb = fc
  .dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })
  .map((o) => o as JsonObject);
const int32Arb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 9 }) },
  { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) },
);
const int64Arb = fc.oneof(
  { weight: 4, arbitrary: fc.bigInt({ min: 1n, max: 32n }) },
  { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }) },
);
const doubleArb = (lo: number, hi: number) =>
  fc.oneof(
    { weight: 5, arbitrary: fc.double({ min: lo, max: hi, noNaN: true }) },
    { weight: 1, arbitrary: fc.double() },
  );

const messageArb = fc
  .record({
    role: fc.oneof(
      { weight: 10, arbitrary: fc.constantFrom("user", "system", "assistant", "tool") },
      { weight: 1, arbitrary: stringArb },
    ),
    content: stringArb,
    name: opt(stringArb, 0.05),
    toolCallId: opt(stringArb, 0.05),
    toolCalls: opt(fc.array(jsonObjectArb, { maxLength: 2 }), 0.05),
  })
  .map(
    (m) =>
      Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as NonNullable<
        ParamsInit["messages"]
      >[number],
  );

const toolChoiceArb = fc
  .oneof(fc.constantFrom<JsonValue>("auto", "none", null, 1, [], ["x"]), jsonObjectArb)
  .map((v) => fromJson(ValueSchema, v));

const paramsArb: fc.Arbitrary<ParamsInit> = fc
  .record({
    model: opt(
      fc.oneof({ weight: 8, arbitrary: fc.constantFrom("service-extract", "") }, { weight: 1, arbitrary: stringArb }),
      0.5,
    ),
    messages: opt(fc.array(messageArb, { maxLength: 4 }), 0.92),
    prompt: opt(stringArb, 0.08),
    maxTokens: opt(int64Arb, 0.6),
    temperature: opt(doubleArb(0, 2), 0.1),
    topP: opt(doubleArb(0, 1), 0.06),
    presencePenalty: opt(doubleArb(-2, 2), 0.04),
    frequencyPenalty: opt(doubleArb(-2, 2), 0.04),
    stop: opt(fc.array(stringArb, { maxLength: 5 }), 0.08),
    seed: opt(int64Arb, 0.06),
    user: opt(stringArb, 0.05),
    n: opt(int32Arb, 0.1),
    tools: opt(fc.array(jsonObjectArb, { maxLength: 3 }), 0.05),
    toolChoice: opt(toolChoiceArb, 0.05),
    responseFormat: opt(jsonObjectArb, 0.05),
    logprobs: opt(fc.boolean(), 0.03),
    topLogprobs: opt(int32Arb, 0.03),
  })
  .map((p) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined)) as ParamsInit);

const wireArb = fc.constantFrom<"varint" | "len" | "i64" | "i32">("varint", "len", "i64", "i32");
const extraArb: fc.Arbitrary<ExtraField> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 18, max: 536_870_911 }), wireArb)
    .map(([no, wire]): ExtraField => ({ t: "unknown", no, wire })),
  fc.tuple(fc.integer({ min: 1, max: 17 }), wireArb).map(([no, wire]): ExtraField => ({ t: "wrong-wire", no, wire })),
  fc.constantFrom<1 | 3 | 9>(1, 3, 9).map((no): ExtraField => ({ t: "invalid-utf8", no })),
  fc.boolean().map((role): ExtraField => ({ t: "message-invalid-utf8", role })),
  fc
    .tuple(fc.integer({ min: 1, max: 40 }), fc.boolean())
    .map(([no, closed]): ExtraField => ({ t: "group", no, closed })),
  fc.constantFrom<ExtraField>({ t: "empty-value" }, { t: "nan-value" }, { t: "struct-empty-value" }),
  fc.constantFrom(10, 32, 33, 47, 48, 99, 101, 2000).map((depth): ExtraField => ({ t: "deep-value", depth })),
);

/** Binary bodies: mostly a clean `ChatParams`, some with hostile fields, some mutated. */
export const binaryBodyArb: fc.Arbitrary<BinaryBody> = fc.record({
  params: fc.oneof({ weight: 30, arbitrary: paramsArb }, { weight: 1, arbitrary: fc.constant<"absent">("absent") }),
  extras: fc.oneof(
    { weight: 4, arbitrary: fc.constant<ExtraField[]>([]) },
    { weight: 1, arbitrary: fc.array(extraArb, { minLength: 1, maxLength: 2 }) },
  ),
  outer: fc.oneof(
    { weight: 12, arbitrary: fc.constant<ExtraField[]>([]) },
    { weight: 1, arbitrary: fc.array(extraArb, { minLength: 1, maxLength: 2 }) },
  ),
  mutations: fc.oneof(
    { weight: 6, arbitrary: fc.constant<Mutation[]>([]) },
    { weight: 1, arbitrary: fc.array(mutationArb, { minLength: 1, maxLength: 3 }) },
  ),
});

/** A length-delimited payload of raw bytes. */
const len = (w: BinaryWriter, no: number, payload: Uint8Array) => w.tag(no, WireType.LengthDelimited).bytes(payload);

const deepValues = new Map<number, Uint8Array>();
/** A `google.protobuf.Value` holding a list holding a list ... `depth` times, around a number (built once each). */
function deepValue(depth: number): Uint8Array {
  const cached = deepValues.get(depth);
  if (cached) return cached;
  let inner = new BinaryWriter().tag(2, WireType.Bit64).double(1).finish();
  for (let i = 0; i < depth; i++) {
    const list = len(new BinaryWriter(), 1, inner).finish();
    inner = len(new BinaryWriter(), 6, list).finish();
  }
  deepValues.set(depth, inner);
  return inner;
}

/** Writes one extra field. */
function writeExtra(w: BinaryWriter, e: ExtraField): void {
  const scalar = (no: number, wire: "varint" | "len" | "i64" | "i32") => {
    if (wire === "varint") w.tag(no, WireType.Varint).uint64(2n ** 63n + 5n);
    else if (wire === "len") len(w, no, new Uint8Array([1, 2, 3]));
    else if (wire === "i64") w.tag(no, WireType.Bit64).fixed64(7n);
    else w.tag(no, WireType.Bit32).fixed32(7);
  };
  switch (e.t) {
    case "unknown":
    case "wrong-wire":
      scalar(e.no, e.wire);
      return;
    case "invalid-utf8":
      len(w, e.no, new Uint8Array([0x61, 0xff, 0xfe]));
      return;
    case "message-invalid-utf8": {
      const m = new BinaryWriter();
      len(m, 1, e.role ? new Uint8Array([0xc0, 0x80]) : Buffer.from("user"));
      len(m, 2, e.role ? Buffer.from("hi") : new Uint8Array([0xed, 0xa0, 0x80]));
      len(w, 2, m.finish());
      return;
    }
    case "group":
      w.tag(e.no, WireType.StartGroup);
      if (e.closed) w.tag(e.no, WireType.EndGroup);
      return;
    case "empty-value":
      len(w, 14, new Uint8Array());
      return;
    case "nan-value":
      len(w, 14, new BinaryWriter().tag(2, WireType.Bit64).double(Number.NaN).finish());
      return;
    case "deep-value":
      len(w, 14, deepValue(e.depth));
      return;
    case "struct-empty-value": {
      const entry = len(len(new BinaryWriter(), 1, Buffer.from("k")), 2, new Uint8Array()).finish();
      len(w, 15, len(new BinaryWriter(), 1, entry).finish());
    }
  }
}

/** Encodes a binary body case. */
export function encodeBinaryBody(b: BinaryBody): Uint8Array {
  const outer = new BinaryWriter();
  if (b.params !== "absent") {
    const params = new BinaryWriter();
    params.raw(toBinary(ChatParamsSchema, create(ChatParamsSchema, b.params)));
    for (const e of b.extras) writeExtra(params, e);
    len(outer, 1, params.finish());
  }
  for (const e of b.outer) writeExtra(outer, e);
  return mutate(outer.finish(), b.mutations);
}

const bulkCache = new Map<number, Uint8Array>();
/** Bulk binary bodies: thousands of messages, around the 32,768-token and 100,000-message limits (built once each). */
export const bulkBinaryArb: fc.Arbitrary<{ what: string; body: Uint8Array }> = fc
  .constantFrom(1000, 8000, 10_923, 100_001)
  .map((count) => {
    let body = bulkCache.get(count);
    if (!body) {
      const params: ParamsInit = {
        maxTokens: 8n,
        messages: Array.from({ length: count }, () => ({ role: "user", content: count > 100_000 ? "" : "hi" })),
      };
      body = toBinary(CreateChatCompletionRequestSchema, create(CreateChatCompletionRequestSchema, { params }));
      bulkCache.set(count, body);
    }
    return { what: `${count} messages`, body };
  });
