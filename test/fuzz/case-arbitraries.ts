import fc from "fast-check";
import { authArb, requestIdArb, type AuthChoice } from "./auth.ts";
import { bulkBodyArb, chatBodyArb, deepBodyArb, serialize } from "./body-arbitraries.ts";
import { mutate, mutationArb, type Gen } from "./json-text.ts";
import { binaryBodyArb, bulkBinaryArb, encodeBinaryBody } from "./proto-arbitraries.ts";
import { rawCaseArb, type RawCase } from "./raw-cases.ts";

/**
 * One fuzz case of any kind, as plain data, and the weighted arbitrary over all kinds. The
 * weights favour cheap, varied cases (structured JSON, binary messages) and keep the costly
 * ones (thousands of messages, 100,000-element arrays, one byte per write) rare.
 */

/** `POST /v1/chat/completions` over fetch. */
export interface EdgeCase {
  kind: "edge-json" | "edge-bytes" | "edge-deep" | "edge-bulk";
  auth: AuthChoice;
  requestId: string | undefined;
  body: Uint8Array;
  note: string;
}

/** A route and method other than a chat call: `/v1/me`, unknown routes, wrong methods. */
export interface RouteCase {
  kind: "edge-route";
  auth: AuthChoice;
  requestId: string | undefined;
  method: string;
  path: string;
}

/** Connect unary `CreateChatCompletion` on the core port, JSON or binary. */
export interface CoreCase {
  kind: "core-json" | "core-json-bytes" | "core-deep" | "core-bulk" | "core-binary" | "core-binary-bytes";
  auth: AuthChoice;
  format: "json" | "binary";
  body: Uint8Array;
  note: string;
}

/** Any fuzz case. */
export type FuzzCase = EdgeCase | RouteCase | CoreCase | RawCase;

/** Which side a property exercises. */
export type Family = "edge" | "core" | "all";

const preview = (b: Uint8Array) => {
  const text = Buffer.from(b).toString("latin1");
  return `${b.length} bytes: ${JSON.stringify(text.length > 400 ? `${text.slice(0, 400)}…` : text)}`;
};

/** A counterexample as people read it: kind, key, and the body's first bytes. */
export function describeCase(c: FuzzCase): string {
  const key = `key=${c.auth.key}#${c.auth.variant}`;
  if (c.kind === "edge-route")
    return `${c.kind} ${c.method} ${c.path} ${key} x-request-id=${JSON.stringify(c.requestId)}`;
  if (c.kind === "edge-raw") {
    const { body, ...rest } = c;
    return `${c.kind}/${c.sub} ${JSON.stringify(rest)} body ${preview(body)}`;
  }
  if (c.kind.startsWith("core"))
    return `${c.kind} ${key} ${(c as CoreCase).format} (${(c as CoreCase).note}) body ${preview((c as CoreCase).body)}`;
  const e = c as EdgeCase;
  return `${e.kind} ${key} x-request-id=${JSON.stringify(e.requestId)} (${e.note}) body ${preview(e.body)}`;
}

/** Attaches a printer, so fast-check reports a case readably instead of dumping its bytes. */
const printable = <T extends FuzzCase>(c: T): T => Object.assign(c, { [fc.toStringMethod]: () => describeCase(c) });

const optionalId = fc.option(requestIdArb, { freq: 3, nil: undefined });
const spacedArb = fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) });
const mutationsArb = fc.array(mutationArb, { minLength: 1, maxLength: 3 });
const randomBytesArb = fc.uint8Array({ maxLength: 200 });

const edge = (kind: EdgeCase["kind"], body: fc.Arbitrary<{ body: Uint8Array; note: string }>) =>
  fc
    .record({ auth: authArb, requestId: optionalId, b: body })
    .map(({ auth, requestId, b }) => printable<EdgeCase>({ kind, auth, requestId, body: b.body, note: b.note }));
const core = (
  kind: CoreCase["kind"],
  format: CoreCase["format"],
  body: fc.Arbitrary<{ body: Uint8Array; note: string }>,
) =>
  fc
    .record({ auth: authArb, b: body })
    .map(({ auth, b }) => printable<CoreCase>({ kind, auth, format, body: b.body, note: b.note }));

const edgeArbs: Array<{ weight: number; arbitrary: fc.Arbitrary<FuzzCase> }> = [
  {
    weight: 60,
    arbitrary: edge(
      "edge-json",
      fc.tuple(chatBodyArb("wire"), spacedArb).map(([b, s]) => ({ body: serialize(b, s), note: "structured" })),
    ),
  },
  {
    weight: 16,
    arbitrary: edge(
      "edge-bytes",
      fc.oneof(
        {
          weight: 3,
          arbitrary: fc
            .tuple(chatBodyArb("wire"), mutationsArb)
            .map(([b, m]) => ({ body: mutate(serialize(b), m), note: `mutated ${JSON.stringify(m)}` })),
        },
        { weight: 1, arbitrary: randomBytesArb.map((body) => ({ body, note: "random bytes" })) },
        { weight: 1, arbitrary: fc.jsonValue().map((v) => ({ body: serialize(v as Gen), note: "any JSON" })) },
      ),
    ),
  },
  {
    weight: 6,
    arbitrary: edge(
      "edge-deep",
      deepBodyArb("wire").map((d) => ({ body: serialize(d.body), note: `depth ${d.depth} in ${d.spot}` })),
    ),
  },
  { weight: 1, arbitrary: edge("edge-bulk", bulkBodyArb("wire")) },
  { weight: 24, arbitrary: rawCaseArb.map((c) => printable(c)) },
  {
    weight: 8,
    arbitrary: fc
      .record({
        auth: authArb,
        requestId: optionalId,
        method: fc.oneof(
          { weight: 4, arbitrary: fc.constant("GET") },
          { weight: 1, arbitrary: fc.constantFrom("POST", "PUT", "DELETE", "PATCH", "OPTIONS") },
        ),
        path: fc.oneof(
          { weight: 4, arbitrary: fc.constant("/v1/me") },
          {
            weight: 2,
            arbitrary: fc.constantFrom(
              "/v1/me/",
              "/v1/me//",
              "/v1/me?x=1",
              "/v1/ME",
              "//v1/me",
              "/v1/me/x",
              "/v1",
              "/",
              "/v1/%00",
              "/v2/me",
              "/v1/chat/completions",
              "/v1/chat/completions/",
              "/v1/chat/completionsx",
            ),
          },
        ),
      })
      .filter((r) => !(r.method === "POST" && r.path.startsWith("/v1/chat/completions")))
      .map((r) => printable<RouteCase>({ kind: "edge-route", ...r })),
  },
];

const toJsonBody = fc
  .tuple(chatBodyArb("proto"), spacedArb)
  .map(([b, s]) => ({ body: serialize(b, s), note: "structured" }));
const coreArbs: Array<{ weight: number; arbitrary: fc.Arbitrary<FuzzCase> }> = [
  { weight: 30, arbitrary: core("core-json", "json", toJsonBody) },
  {
    weight: 10,
    arbitrary: core(
      "core-json-bytes",
      "json",
      fc.oneof(
        {
          weight: 3,
          arbitrary: fc
            .tuple(chatBodyArb("proto"), mutationsArb)
            .map(([b, m]) => ({ body: mutate(serialize(b), m), note: `mutated ${JSON.stringify(m)}` })),
        },
        { weight: 1, arbitrary: randomBytesArb.map((body) => ({ body, note: "random bytes" })) },
        { weight: 1, arbitrary: fc.jsonValue().map((v) => ({ body: serialize(v as Gen), note: "any JSON" })) },
      ),
    ),
  },
  {
    weight: 4,
    arbitrary: core(
      "core-deep",
      "json",
      deepBodyArb("proto").map((d) => ({ body: serialize(d.body), note: `depth ${d.depth} in ${d.spot}` })),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      core("core-bulk", "json", bulkBodyArb("proto")),
      core(
        "core-bulk",
        "binary",
        bulkBinaryArb.map((d) => ({ body: d.body, note: d.what })),
      ),
    ),
  },
  {
    weight: 30,
    arbitrary: core(
      "core-binary",
      "binary",
      binaryBodyArb.map((b) => ({
        body: encodeBinaryBody(b),
        note: JSON.stringify({ extras: b.extras, outer: b.outer, mutations: b.mutations }),
      })),
    ),
  },
  {
    weight: 8,
    arbitrary: core(
      "core-binary-bytes",
      "binary",
      randomBytesArb.map((body) => ({ body, note: "random bytes" })),
    ),
  },
];

/** Every kind of case of a family, weighted. */
export function caseArb(family: Family): fc.Arbitrary<FuzzCase> {
  if (family === "edge") return fc.oneof(...edgeArbs);
  if (family === "core") return fc.oneof(...coreArbs);
  return fc.oneof(...edgeArbs, ...coreArbs);
}
