import fc from "fast-check";

/**
 * JSON texts that `JSON.stringify` cannot write: number literals that overflow or lose
 * precision, objects with repeated keys, odd whitespace. The fuzzer builds bodies from these
 * pieces, serializes them, and then judges the resulting bytes only, so what a generator meant
 * never has to agree with what it wrote.
 */

/** A JSON fragment written verbatim, such as `1e400` or `123456789012345678901234567890`. */
export class Raw {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toJSON(): string {
    return `Raw(${this.text.length > 80 ? `${this.text.slice(0, 80)}…(${this.text.length} chars)` : this.text})`;
  }
}

/** An object written entry by entry, so that a key may repeat. */
export class Entries {
  readonly entries: ReadonlyArray<readonly [string, Gen]>;
  constructor(entries: ReadonlyArray<readonly [string, Gen]>) {
    this.entries = entries;
  }
}

/** A value the serializer can write. */
export type Gen = null | boolean | number | string | Raw | Entries | readonly Gen[] | { readonly [key: string]: Gen };

/** Writes a generated value as JSON text; `space` puts whitespace between tokens. */
export function render(value: Gen, space = ""): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof Entries) {
    const members = value.entries.map(([k, v]) => `${JSON.stringify(k)}${space}:${space}${render(v, space)}`);
    return `{${space}${members.join(`,${space}`)}${space}}`;
  }
  if (Array.isArray(value)) return `[${space}${value.map((v: Gen) => render(v, space)).join(`,${space}`)}${space}]`;
  if (value !== null && typeof value === "object")
    return render(new Entries(Object.entries(value as Record<string, Gen>)), space);
  if (typeof value === "number" && !Number.isFinite(value)) return "null";
  return JSON.stringify(value);
}

/** Nests `inner` inside `depth` arrays or single-key objects, as text, in linear time. */
export function nested(depth: number, inner: string, shape: "array" | "object"): Raw {
  if (shape === "array") return new Raw(`${"[".repeat(depth)}${inner}${"]".repeat(depth)}`);
  return new Raw(`${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`);
}

/** Number literals at the edges of what a JSON parser or a protobuf field can hold. */
export const HOSTILE_NUMBERS: readonly Raw[] = [
  "1e400",
  "-1e400",
  "1e-400",
  "-0",
  "0.0",
  "1E2",
  "1e308",
  "4.9e-324",
  "123456789012345678901234567890",
  "-123456789012345678901234567890",
  "9007199254740993",
  "9223372036854775807",
  "9223372036854775808",
  "18446744073709551616",
  "2147483647",
  "2147483648",
  "-2147483649",
  "4096",
  "4097",
  "0.5",
  "1.0",
  "8",
  "9",
  "20",
  "21",
  "-1",
  "0",
  "1",
  "2",
  "2.0000000001",
  "1e1000000",
].map((t) => new Raw(t));

/** Strings that stress length limits (in code points), Unicode handling and token counting. */
export const stringArb: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      "hi",
      "Where do rivers carry water?",
      "Rivers carry water to the sea.",
      "service-extract",
      "user",
      "",
    ),
  },
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "\ud800",
      "a\udc00b",
      "\u0000",
      "\u2028\u2029",
      "<|endoftext|>",
      "\ufeff",
      "\\",
      '"',
      "😀",
    ),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("x", "😀", "é", " ", "\ud800"), fc.constantFrom(1, 255, 256, 257, 511, 512, 513, 1000))
      .map(([unit, count]) => unit.repeat(count)),
  },
);

/** Any small JSON value, of any type: the wrong type for most fields. */
export const anyJsonArb: fc.Arbitrary<Gen> = fc.oneof(
  fc.constantFrom<Gen>(null, true, false, 0, 1, -1, 1.5, "", "x", [], {}, ["x"], [1], { a: 1 }, [{}], { type: "text" }),
  fc.constantFrom(...HOSTILE_NUMBERS),
  stringArb,
  fc.double(),
  fc.jsonValue({ maxDepth: 2 }).map((v) => v as Gen),
);

/** One change to a body's bytes: the hostile twins of a well-formed body. */
export type Mutation =
  | { op: "truncate"; at: number }
  | { op: "insert"; at: number; bytes: number[] }
  | { op: "replace"; at: number; byte: number }
  | { op: "bom" }
  | { op: "append"; bytes: number[] };

/** Byte sequences that are not UTF-8: stray continuation bytes, overlongs, encoded surrogates. */
export const INVALID_UTF8: readonly number[][] = [
  [0xff],
  [0xfe],
  [0x80],
  [0xc0, 0x80],
  [0xc3],
  [0xe2, 0x82],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
];

/** Mutations, with positions as fractions of the body length so they shrink well. */
export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.double({ min: 0, max: 1, noNaN: true }).map((at): Mutation => ({ op: "truncate", at })),
  fc
    .tuple(
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.oneof(
        fc.constantFrom(...INVALID_UTF8),
        fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 4 }),
      ),
    )
    .map(([at, bytes]): Mutation => ({ op: "insert", at, bytes })),
  fc
    .tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 0, max: 255 }))
    .map(([at, byte]): Mutation => ({ op: "replace", at, byte })),
  fc.constant<Mutation>({ op: "bom" }),
  fc
    .oneof(fc.constantFrom(...INVALID_UTF8), fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 8 }))
    .map((bytes): Mutation => ({ op: "append", bytes })),
);

/** Applies mutations in order. */
export function mutate(body: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let out = Buffer.from(body);
  for (const m of mutations) {
    const at = (f: number) => Math.min(out.length, Math.floor(f * (out.length + 1)));
    if (m.op === "truncate") out = out.subarray(0, at(m.at));
    else if (m.op === "insert")
      out = Buffer.concat([out.subarray(0, at(m.at)), Buffer.from(m.bytes), out.subarray(at(m.at))]);
    else if (m.op === "replace" && out.length > 0) {
      out = Buffer.from(out);
      out[Math.min(out.length - 1, at(m.at))] = m.byte;
    } else if (m.op === "bom") out = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), out]);
    else if (m.op === "append") out = Buffer.concat([out, Buffer.from(m.bytes)]);
  }
  return out;
}

/** UTF-8 bytes of a text. */
export const utf8 = (text: string): Uint8Array => Buffer.from(text, "utf8");
