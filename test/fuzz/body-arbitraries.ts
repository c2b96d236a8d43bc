import fc from "fast-check";
import { anyJsonArb, Entries, HOSTILE_NUMBERS, nested, Raw, render, stringArb, utf8, type Gen } from "./json-text.ts";

/**
 * Arbitraries for chat request bodies in the two JSON dialects Sluice reads: the OpenAI wire
 * shape of the HTTP edge (snake_case) and the protobuf JSON of the core's Connect port
 * (`{"params": {...}}`, lowerCamelCase, also accepting the proto field names). Most fields are
 * absent, and a present one is valid, null, or of any other type, so that a good share of the
 * bodies pass and the rest fail on exactly the kinds of input the issue lists.
 */

/** Which JSON dialect a body is written in. */
export type Dialect = "wire" | "proto";

const ABSENT = Symbol("absent");
type Field = readonly [key: string, value: Gen | typeof ABSENT];

/** A field present with probability `p`: valid most of the time, else of any type (`wrong` in 10). */
function field(key: string, valid: fc.Arbitrary<Gen>, p: number, wrong = 3): fc.Arbitrary<Field> {
  const scale = 1000;
  const present = fc.oneof(
    { weight: 10 - wrong, arbitrary: valid },
    {
      weight: wrong,
      arbitrary: fc.oneof(
        { weight: 3, arbitrary: anyJsonArb },
        { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_NUMBERS) },
      ),
    },
  );
  return fc.oneof(
    { weight: Math.round((1 - p) * scale), arbitrary: fc.constant<Field>([key, ABSENT]) },
    { weight: Math.round(p * scale), arbitrary: present.map((v): Field => [key, v]) },
  );
}

/** Keys nobody declared, some of which name Object.prototype members. */
const unknownKeyArb = fc.oneof(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "toString",
    "hasOwnProperty",
    "valueOf",
    "extra",
    "functions",
    "logit_bias",
    "",
  ),
  fc.string({ unit: "binary", maxLength: 8 }),
);

/**
 * Assembles an object from fields, with optional unknown keys and an optional repeat of one
 * key (the last value wins in JSON.parse; protobuf JSON refuses it).
 */
function objectOf(fields: fc.Arbitrary<Field>[]): fc.Arbitrary<Entries> {
  return fc
    .tuple(
      fc.tuple(...fields),
      fc.oneof(
        { weight: 9, arbitrary: fc.constant<Field[]>([]) },
        { weight: 1, arbitrary: fc.array(fc.tuple(unknownKeyArb, anyJsonArb), { maxLength: 3 }) },
      ),
      fc.oneof(
        { weight: 19, arbitrary: fc.constant<number | undefined>(undefined) },
        { weight: 1, arbitrary: fc.nat() },
      ),
    )
    .map(([own, unknown, repeat]) => {
      const entries = [...own, ...unknown].filter((f): f is readonly [string, Gen] => f[1] !== ABSENT);
      if (repeat !== undefined && entries.length > 0) {
        const [key] = entries[repeat % entries.length] as readonly [string, Gen];
        entries.push([key, entries[(repeat + 1) % entries.length]?.[1] ?? null]);
      }
      return new Entries(entries);
    });
}

const name = (d: Dialect, snake: string, camel: string) => fc.constant(d === "wire" ? snake : camel);
/** Proto JSON accepts both the lowerCamel name and the proto name of a field. */
const key = (d: Dialect, snake: string, camel: string): fc.Arbitrary<string> =>
  d === "wire"
    ? name(d, snake, camel)
    : fc.oneof({ weight: 9, arbitrary: fc.constant(camel) }, { weight: 1, arbitrary: fc.constant(snake) });

const roleArb: fc.Arbitrary<Gen> = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom("user", "system", "assistant", "tool", "developer", "function") },
  { weight: 1, arbitrary: fc.constantFrom("User", "bot", "", "model", " user") },
);

const textPartArb: fc.Arbitrary<Gen> = fc.oneof(
  { weight: 8, arbitrary: stringArb.map((text): Gen => ({ type: "text", text })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Gen>(
      { type: "image_url", image_url: { url: "x" } },
      { type: "text" },
      { text: "x" },
      "x",
      null,
    ),
  },
);

const contentArb: fc.Arbitrary<Gen> = fc.oneof(
  { weight: 8, arbitrary: stringArb },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.array(textPartArb, { maxLength: 3 }) },
);

const jsonObjectArb: fc.Arbitrary<Gen> = fc.dictionary(
  fc.string({ maxLength: 6 }),
  fc.jsonValue({ maxDepth: 2 }).map((v) => v as Gen),
  { maxKeys: 3 },
);

/** One chat message: usually well-formed, sometimes not an object at all. */
export function messageArb(d: Dialect): fc.Arbitrary<Gen> {
  const fields = [
    field("role", roleArb, 0.97, 1),
    field("content", contentArb, 0.9, 1),
    field("name", stringArb, 0.05),
    key(d, "tool_call_id", "toolCallId").chain((k) => field(k, stringArb, 0.05)),
    key(d, "tool_calls", "toolCalls").chain((k) => field(k, fc.array(jsonObjectArb, { maxLength: 2 }), 0.05)),
  ];
  return fc.oneof({ weight: 20, arbitrary: objectOf(fields) }, { weight: 1, arbitrary: anyJsonArb });
}

const intArb = fc.oneof(
  fc.integer({ min: 1, max: 32 }),
  fc.integer(),
  fc.constantFrom(0, -1, 4096, 4097, 2 ** 31, 2 ** 53),
);
/** Proto JSON writes 64-bit integers as strings; both forms are accepted. */
const int64Arb = (d: Dialect): fc.Arbitrary<Gen> =>
  d === "wire"
    ? intArb
    : fc.oneof(
        intArb,
        intArb.map(String),
        fc.constantFrom("9223372036854775807", "-9223372036854775808", "9223372036854775808", "0x10", " 5", "1e3"),
      );
const doubleArb = (lo: number, hi: number, d: Dialect): fc.Arbitrary<Gen> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.double({ min: lo, max: hi, noNaN: true }) },
    { weight: 2, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
    { weight: d === "proto" ? 1 : 0, arbitrary: fc.constantFrom<Gen>("NaN", "Infinity", "-Infinity", "1.5", "") },
  );

/** The fields of a chat request (ChatParams for the core), each mostly absent. */
function paramsArb(d: Dialect, messages: fc.Arbitrary<Gen>): fc.Arbitrary<Entries> {
  const k = (snake: string, camel: string, valid: fc.Arbitrary<Gen>, p: number) =>
    key(d, snake, camel).chain((kk) => field(kk, valid, p));
  return objectOf([
    field(
      "model",
      fc.oneof({ weight: 8, arbitrary: fc.constantFrom("service-extract", "") }, { weight: 2, arbitrary: stringArb }),
      0.5,
    ),
    field("messages", messages, 0.92, 1),
    field("prompt", d === "wire" ? fc.oneof(stringArb, fc.array(stringArb, { maxLength: 3 })) : stringArb, 0.08),
    ...(d === "wire" ? [field("stream", fc.boolean(), 0.2)] : []),
    k("max_tokens", "maxTokens", int64Arb(d), 0.6),
    ...(d === "wire" ? [field("max_completion_tokens", intArb, 0.05)] : []),
    field("temperature", doubleArb(0, 2, d), 0.12),
    k("top_p", "topP", doubleArb(0, 1, d), 0.08),
    k("presence_penalty", "presencePenalty", doubleArb(-2, 2, d), 0.05),
    k("frequency_penalty", "frequencyPenalty", doubleArb(-2, 2, d), 0.05),
    field(
      "stop",
      d === "wire" ? fc.oneof(stringArb, fc.array(stringArb, { maxLength: 5 })) : fc.array(stringArb, { maxLength: 5 }),
      0.08,
    ),
    field("seed", int64Arb(d), 0.08),
    field("user", stringArb, 0.06),
    field(
      "n",
      fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }) }, { weight: 1, arbitrary: intArb }),
      0.1,
    ),
    field("tools", fc.array(jsonObjectArb, { maxLength: 3 }), 0.06),
    k("tool_choice", "toolChoice", fc.oneof(fc.constantFrom<Gen>("auto", "none", "required"), jsonObjectArb), 0.06),
    k("response_format", "responseFormat", fc.oneof(fc.constant<Gen>({ type: "json_object" }), jsonObjectArb), 0.06),
    field("logprobs", fc.boolean(), 0.04),
    k("top_logprobs", "topLogprobs", fc.integer({ min: -1, max: 21 }), 0.04),
  ]);
}

/** A chat request body in a dialect; the proto dialect wraps the params as the request message. */
export function chatBodyArb(d: Dialect): fc.Arbitrary<Gen> {
  const params = paramsArb(d, fc.array(messageArb(d), { maxLength: 4 }));
  if (d === "wire") return params;
  return fc.oneof(
    { weight: 20, arbitrary: params.map((p): Gen => ({ params: p })) },
    {
      weight: 1,
      arbitrary: fc.tuple(params, anyJsonArb).map(
        ([p, extra]): Gen =>
          new Entries([
            ["params", p],
            ["unknownTop", extra],
          ]),
      ),
    },
    { weight: 1, arbitrary: anyJsonArb.map((p): Gen => ({ params: p })) },
  );
}

/** Where a deep value is put: places the core reads, places it ignores, or the body itself. */
type DeepSpot = "tools" | "response_format" | "tool_choice" | "tool_calls" | "unknown" | "body";

/** A chat body with one deeply nested value; depths cluster around the edge's limit of 64. */
export function deepBodyArb(d: Dialect): fc.Arbitrary<{ body: Gen; depth: number; spot: DeepSpot }> {
  const depthArb = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 55, max: 70 }) },
    { weight: 2, arbitrary: fc.integer({ min: 90, max: 110 }) },
    { weight: 1, arbitrary: fc.constantFrom(1, 1000, 10_000, 100_000) },
  );
  const spotArb = fc.constantFrom<DeepSpot>("tools", "response_format", "tool_choice", "tool_calls", "unknown", "body");
  return fc
    .tuple(depthArb, spotArb, fc.constantFrom<"array" | "object">("array", "object"))
    .map(([depth, spot, shape]) => {
      const deep = nested(depth, "1", shape);
      const deepObject = nested(depth, "1", "object");
      const user = { role: "user", content: "hi" };
      const k = (snake: string, camel: string) => (d === "wire" ? snake : camel);
      let params: Gen;
      if (spot === "body") return { body: deep, depth, spot };
      if (spot === "tools") params = { messages: [user], tools: [new Entries([["x", deep]])] };
      else if (spot === "response_format")
        params = { messages: [user], [k("response_format", "responseFormat")]: deepObject };
      else if (spot === "tool_choice") params = { messages: [user], [k("tool_choice", "toolChoice")]: deepObject };
      else if (spot === "tool_calls")
        params = { messages: [{ ...user, [k("tool_calls", "toolCalls")]: [new Entries([["x", deep]])] }] };
      else params = { messages: [user], unknown_deep: deep };
      return { body: d === "wire" ? params : { params }, depth, spot };
    });
}

/**
 * Bodies with thousands of messages or huge arrays, built directly (not element by element
 * through fast-check) so they stay cheap to generate. Counts sit on both sides of the limits:
 * 100,000 messages, 4 stop sequences, 128 tools, 32,768 input tokens (3 per message + 3).
 */
export function bulkBodyArb(d: Dialect): fc.Arbitrary<{ body: Uint8Array; note: string }> {
  return bulkGenArb(d).map(({ body, what }) => {
    const key = `${d} ${what}`;
    let bytes = bulkCache.get(key);
    if (!bytes) {
      bytes = serialize(body);
      bulkCache.set(key, bytes);
    }
    return { body: bytes, note: what };
  });
}

/** Serialized bulk bodies, built once each: they are few and costly. */
const bulkCache = new Map<string, Uint8Array>();

function bulkGenArb(d: Dialect): fc.Arbitrary<{ body: Gen; what: string }> {
  const k = (snake: string, camel: string) => (d === "wire" ? snake : camel);
  const user = { role: "user", content: "hi" };
  const wrap = (params: Gen): Gen => (d === "wire" ? params : { params });
  const turn = (i: number) => render({ role: i % 2 ? "assistant" : "user", content: "hi" });
  return fc.oneof(
    fc.constantFrom(1000, 3000, 8000, 10_922, 10_923, 12_000).map((count) => ({
      what: `${count} messages`,
      body: wrap({
        [k("max_tokens", "maxTokens")]: 8,
        messages: new Raw(`[${Array.from({ length: count }, (_, i) => turn(i)).join(",")}]`),
      }),
    })),
    fc.constant({
      what: "100001 messages",
      body: wrap({ messages: new Raw(`[${Array(100_001).fill('{"role":"user","content":""}').join(",")}]`) }),
    }),
    fc.constantFrom(4, 5, 10_000).map((count) => ({
      what: `${count} stop`,
      body: wrap({ messages: [user], stop: new Raw(`[${Array(count).fill('"x"').join(",")}]`) }),
    })),
    fc.constantFrom(128, 129, 5000).map((count) => ({
      what: `${count} tools`,
      body: wrap({ messages: [user], tools: new Raw(`[${Array(count).fill('{"type":"function"}').join(",")}]`) }),
    })),
    fc.constantFrom(10_000, 100_000).map((count) => ({
      what: `${count} ignored`,
      body: wrap({
        messages: [user],
        [k("unknown_list", "unknownList")]: new Raw(`[${Array(count).fill("0").join(",")}]`),
      }),
    })),
    fc
      .constantFrom(40_000, 200_000)
      .map((count) => ({ what: `prompt of ${count} words`, body: wrap({ prompt: "word ".repeat(count) }) })),
    ...(d === "wire"
      ? [
          fc.constant({
            what: "10000 content parts",
            body: {
              messages: [
                { role: "user", content: new Raw(`[${Array(10_000).fill('{"type":"text","text":"a"}').join(",")}]`) },
              ],
            },
          }),
        ]
      : []),
  );
}

/** Serializes a generated body, sometimes with whitespace between tokens. */
export const serialize = (body: Gen, spaced = false): Uint8Array => utf8(render(body, spaced ? " \n\t" : ""));
