import fc from "fast-check";
import { chatBodyArb, serialize } from "./body-arbitraries.ts";
import { authArb, authHeader, requestIdArb, type AuthChoice, type Secrets } from "./auth.ts";
import { edgeChatOutcome } from "./request-oracle.ts";
import type { KeyKind, Outcome } from "./rules-oracle.ts";

/**
 * HTTP/1.1 requests only a bare socket can send: control characters in header names and
 * values, folded lines, bare LF, repeated and oversized headers, a Content-Length that is
 * shorter or longer than the body, hand-made chunked framing (good and broken), bodies that
 * arrive one byte per write. Each is data (printed as a counterexample) rendered to bytes at
 * send time, with the one observable answer computed from the data.
 *
 * Node's HTTP parser (llhttp, strict mode) refuses a malformed head itself: it writes exactly
 * `HTTP/1.1 400 Bad Request` (431 for headers over its limits) with `Connection: close` and
 * closes, before Sluice sees a request. Once a request has delivered body bytes, the bytes
 * after them are parsed only as the body is consumed: a framing error in the body (or after a
 * short Content-Length) gets that same 400 when Sluice reads the body (a key that passed the
 * check), while a refusal made from the headers alone (an invalid key) is sent first and the
 * connection is then dropped. An error Node finds at the start of the body, after Sluice
 * answered synchronously (a missing bearer), destroys the socket with that answer unsent.
 * Cases whose answer would be a race between the two are not generated.
 */

/** A defect of the head that llhttp refuses. */
export type Defect =
  | { t: "ctl-in-value"; char: number }
  | { t: "bad-name-char"; char: number }
  | { t: "obs-fold" }
  | { t: "space-before-colon" }
  | { t: "bare-lf" }
  | { t: "dup-content-length"; same: boolean }
  | { t: "content-length-and-chunked" }
  | { t: "transfer-encoding"; value: string }
  | { t: "content-length"; value: string };

/** A defect of a chunked body. */
export type ChunkDefect = "bad-size" | "no-crlf" | "short-then-fin";

/** A raw request, as data. */
export interface RawCase {
  kind: "edge-raw";
  sub:
    | "defect"
    | "oversized"
    | "many-headers"
    | "dup-headers"
    | "cl-short"
    | "cl-long"
    | "cl-huge"
    | "bytewise"
    | "chunked"
    | "bad-chunk";
  auth: AuthChoice;
  /** More Authorization headers after the first; Node keeps the first. */
  moreAuth: AuthChoice[];
  requestIds: string[];
  body: Uint8Array;
  framing:
    | { type: "length"; declared: string }
    | { type: "chunked"; sizes: number[]; ext: boolean; trailer: boolean; defect?: ChunkDefect | undefined };
  writes: "whole" | "bytewise";
  /** `hold` keeps the connection open and takes the first response; `end` half-closes. */
  finish: "end" | "hold";
  /** Headers of no meaning before the Authorization header: [count, value length]. */
  padding: [number, number];
  defect?: Defect | undefined;
}

/** What a raw case must get: a Sluice answer, or Node's own refusal. */
export type RawExpect =
  | { type: "reply"; outcome: Outcome; requestId: string | undefined }
  | { type: "node"; status: 400 | 431 }
  | { type: "dropped" };

const CTL = [...Array.from({ length: 32 }, (_, i) => i).filter((c) => c !== 9), 0x7f];
const NOT_TOKEN = [
  ...Array.from({ length: 33 }, (_, i) => i),
  ...[...'()<>@,;\\"/[]?={}'].map((c) => c.charCodeAt(0)),
  0x7f,
  0x80,
  0xc3,
  0xff,
];
const defectArb: fc.Arbitrary<Defect> = fc.oneof(
  fc.constantFrom(...CTL).map((char): Defect => ({ t: "ctl-in-value", char })),
  fc.constantFrom(...NOT_TOKEN).map((char): Defect => ({ t: "bad-name-char", char })),
  fc.constantFrom<Defect>(
    { t: "obs-fold" },
    { t: "space-before-colon" },
    { t: "bare-lf" },
    { t: "content-length-and-chunked" },
  ),
  fc.boolean().map((same): Defect => ({ t: "dup-content-length", same })),
  fc
    .constantFrom("gzip", "chunked, gzip", "identity", "chunked, chunked", "xchunked")
    .map((value): Defect => ({ t: "transfer-encoding", value })),
  fc
    .constantFrom("abc", "-1", "+5", "1.5", "0x10", "", "1 2", "5,5", "18446744073709551616", "99999999999999999999999")
    .map((value): Defect => ({ t: "content-length", value })),
);

/** Keys whose answer waits on the (asynchronous) key check. */
const KEYED: KeyKind[] = ["good", "unknown", "malformed", "revoked", "limited", "unonboarded"];
/** Keys that pass the check, so Sluice goes on to read the body. */
const READS_BODY: KeyKind[] = ["good", "limited", "unonboarded"];
const keyedAuthArb = authArb.filter((a) => KEYED.includes(a.key));
const smallBody = chatBodyArb("wire")
  .map((b) => serialize(b))
  .filter((b) => b.length < 3000);

/**
 * Whether llhttp refuses a pipelined "next request" at its first byte. The bytes after a short
 * Content-Length are cut where this holds, so Node refuses them at once instead of waiting for
 * the rest of a method name.
 */
const stopsAtOnce = (byte: number | undefined) =>
  byte !== undefined && !(byte >= 0x41 && byte <= 0x5a) && ![0x20, 0x09, 0x0d, 0x0a].includes(byte);

/** Raw requests of every sub-kind, each with the one answer `rawExpect` gives it. */
export const rawCaseArb: fc.Arbitrary<RawCase> = fc
  .record({
    sub: fc.constantFrom<RawCase["sub"]>(
      "defect",
      "defect",
      "oversized",
      "many-headers",
      "dup-headers",
      "cl-short",
      "cl-long",
      "cl-huge",
      "bytewise",
      "bytewise",
      "chunked",
      "chunked",
      "bad-chunk",
    ),
    auth: authArb,
    keyed: keyedAuthArb,
    moreAuth: fc.array(authArb, { minLength: 1, maxLength: 2 }),
    requestIds: fc.array(requestIdArb, { minLength: 1, maxLength: 2 }),
    body: smallBody,
    sizes: fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 6 }),
    flags: fc.tuple(fc.boolean(), fc.boolean()),
    cut: fc.double({ min: 0, max: 1, noNaN: true }),
    extra: fc.integer({ min: 1, max: 1000 }),
    huge: fc.constantFrom("33554433", "67108864", "9007199254740991", "9223372036854775807", "18446744073709551615"),
    defect: defectArb,
    chunkDefect: fc.constantFrom<ChunkDefect>("bad-size", "no-crlf", "short-then-fin"),
    padding: fc.oneof(
      fc.tuple(
        fc.constantFrom(1, 2),
        fc.oneof(
          fc.integer({ min: 1, max: 40_000 }),
          fc.integer({ min: 16_000, max: 16_400 }),
          fc.integer({ min: 8000, max: 8200 }),
        ),
      ),
      fc.tuple(fc.constantFrom(100, 900, 995, 996, 997, 998, 1100, 2100), fc.constant(1)),
    ),
  })
  // biome-ignore lint/suspicious/useIterableCallbackReturn: the switch below returns for every `sub`.
  .map((g): RawCase => {
    const length = (n: number) => ({ type: "length" as const, declared: String(n) });
    // The connection stays open until the answer: a half-close (FIN) is a client that left,
    // and Node then drops the call; only cases that need the FIN to end a body send one.
    const base: RawCase = {
      kind: "edge-raw",
      sub: g.sub,
      auth: g.auth,
      moreAuth: [],
      requestIds: g.requestIds.slice(0, 1),
      body: g.body,
      framing: length(g.body.length),
      writes: "whole",
      finish: "hold",
      padding: [0, 0],
    };
    switch (g.sub) {
      case "defect":
        return { ...base, defect: g.defect };
      case "oversized":
        return { ...base, padding: g.padding[1] > 1 ? g.padding : [1, 20_000] };
      case "many-headers":
        return { ...base, padding: g.padding[1] === 1 ? g.padding : [2100, 1] };
      case "dup-headers":
        return { ...base, moreAuth: g.moreAuth, requestIds: g.requestIds };
      case "cl-short": {
        const at = Array.from({ length: g.body.length }, (_, i) => i).filter((i) => stopsAtOnce(g.body[i]));
        const cut = at[Math.floor(g.cut * at.length)];
        return cut === undefined ? base : { ...base, auth: g.keyed, framing: length(cut) };
      }
      case "cl-long": {
        const answersAtOnce = ["missing", "not-bearer", "unknown", "malformed", "revoked"].includes(g.auth.key);
        return { ...base, framing: length(g.body.length + g.extra), finish: answersAtOnce ? "hold" : "end" };
      }
      case "cl-huge":
        return { ...base, body: new Uint8Array(), framing: { type: "length", declared: g.huge }, finish: "hold" };
      case "bytewise":
        return {
          ...base,
          writes: "bytewise",
          framing: g.flags[0] ? length(g.body.length) : { type: "chunked", sizes: [1], ext: false, trailer: false },
        };
      case "chunked":
        return { ...base, framing: { type: "chunked", sizes: g.sizes, ext: g.flags[0], trailer: g.flags[1] } };
      case "bad-chunk":
        return {
          ...base,
          auth: g.keyed,
          framing: { type: "chunked", sizes: g.sizes, ext: false, trailer: false, defect: g.chunkDefect },
          finish: g.chunkDefect === "short-then-fin" ? "end" : "hold",
        };
    }
  });

/** The body bytes on the wire: as is, or in chunks of the given sizes (cycled), maybe broken. */
function framedBody(c: RawCase): Buffer {
  const body = Buffer.from(c.body);
  if (c.framing.type === "length") return body;
  const { sizes, ext, trailer, defect } = c.framing;
  const parts: Buffer[] = [];
  if (defect === "bad-size") parts.push(Buffer.from("zz\r\nab\r\n"));
  for (let at = 0, i = 0; at < body.length; i++) {
    const size = sizes[i % sizes.length] ?? 1;
    const piece = body.subarray(at, at + size);
    const crlf = defect === "no-crlf" && i === 0 ? "XX" : "\r\n";
    parts.push(Buffer.from(`${piece.length.toString(16)}${ext ? ";a=b" : ""}\r\n`, "latin1"), piece, Buffer.from(crlf));
    at += size;
  }
  if (defect === "short-then-fin") parts.push(Buffer.from("ff\r\nabc"));
  else parts.push(Buffer.from(`0\r\n${trailer ? "x-trailer: 1\r\n" : ""}\r\n`));
  return Buffer.concat(parts);
}

/** The head, the header lines in order, with the defect applied. */
export function renderRaw(c: RawCase, secrets: Secrets): { head: Buffer; body: Buffer } {
  const lines: string[] = ["POST /v1/chat/completions HTTP/1.1", "host: 127.0.0.1"];
  for (let i = 0; i < c.padding[0]; i++)
    lines.push(`${c.padding[1] === 1 ? "x" : `x-pad-${i}`}: ${"p".repeat(c.padding[1])}`);
  for (const a of [c.auth, ...c.moreAuth]) {
    const value = authHeader(a, secrets);
    if (value !== undefined) lines.push(`authorization: ${value}`);
  }
  for (const id of c.requestIds) lines.push(`x-request-id: ${id}`);
  lines.push("content-type: application/json");
  const d = c.defect;
  if (d?.t === "transfer-encoding") lines.push(`transfer-encoding: ${d.value}`);
  else if (d?.t === "content-length") lines.push(`content-length: ${d.value}`);
  else if (c.framing.type === "chunked") lines.push("transfer-encoding: chunked");
  else lines.push(`content-length: ${c.framing.declared}`);
  if (d?.t === "dup-content-length") lines.push(`content-length: ${d.same ? c.body.length : c.body.length + 1}`);
  if (d?.t === "content-length-and-chunked") lines.push("transfer-encoding: chunked");
  if (d?.t === "ctl-in-value") lines.push(`x-fuzz: a${String.fromCharCode(d.char)}b`);
  if (d?.t === "bad-name-char") lines.push(`x-f${String.fromCharCode(d.char)}uzz: b`);
  if (d?.t === "obs-fold") lines.push("x-fuzz: a", " folded");
  if (d?.t === "space-before-colon") lines.push("x-fuzz : b");
  const eol = d?.t === "bare-lf" ? "\n" : "\r\n";
  return { head: Buffer.from(`${lines.join(eol)}${eol}${eol}`, "latin1"), body: framedBody(c) };
}

/**
 * Node's limits on a head, past which its parser answers 431: the URL plus every header name
 * and value (`--max-http-header-size`, 16 KiB, counted without separators, as Node's
 * `TrackHeader` does), and, as observed on Node 24, 1,000 header lines.
 */
const MAX_HEADER_BYTES = 16_384;
const MAX_HEADER_LINES = 1000;

/** The bytes Node counts against its header size limit. */
function trackedHeaderBytes(head: Buffer): number {
  const [requestLine = "", ...lines] = head.toString("latin1").split("\r\n");
  let n = (requestLine.split(" ")[1] ?? "").length;
  for (const line of lines) {
    const at = line.indexOf(":");
    if (at > 0) n += at + line.slice(at + 1).replace(/^[ \t]+/, "").length;
  }
  return n;
}

/** The one observable answer to a raw case. */
export function rawExpect(c: RawCase, head: Buffer): RawExpect {
  const d = c.defect;
  // A Transfer-Encoding without chunked is refused at the start of the body, after the request
  // was dispatched (with chunked in the wrong place, at the head): an answer Sluice wrote
  // synchronously (a missing bearer) is still unsent when Node destroys the socket, so that
  // client sees the connection close with nothing.
  const codings = d?.t === "transfer-encoding" ? d.value.split(",").map((x) => x.trim()) : [];
  if (
    d?.t === "transfer-encoding" &&
    !codings.includes("chunked") &&
    (c.auth.key === "missing" || c.auth.key === "not-bearer")
  )
    return { type: "dropped" };
  if (d) return { type: "node", status: 400 };
  const lines = head.toString("latin1").split("\r\n").length - 3;
  if (trackedHeaderBytes(head) >= MAX_HEADER_BYTES || lines > MAX_HEADER_LINES) return { type: "node", status: 431 };
  // Node keeps the first Authorization line; a "missing" choice writes none.
  const first = [c.auth, ...c.moreAuth].find((a) => a.key !== "missing");
  const key: KeyKind = first ? first.key : "missing";
  const requestId = c.requestIds.length > 0 ? c.requestIds.join(", ") : undefined;
  const early = edgeChatOutcome(
    key,
    c.body,
    c.framing.type === "length" && Number(c.framing.declared) > 32 * 1024 * 1024,
  );
  const reply: RawExpect = { type: "reply", outcome: early, requestId };
  const bodyError: RawExpect = READS_BODY.includes(key) ? { type: "node", status: 400 } : reply;
  if (c.framing.type === "chunked") {
    // A bad first chunk-size line is parsed with the head; later errors when the body is read.
    if (c.framing.defect === "bad-size") return { type: "node", status: 400 };
    return c.framing.defect ? bodyError : reply;
  }
  const declared = Number(c.framing.declared);
  if (declared > 32 * 1024 * 1024 || declared === c.body.length) return reply;
  // With no body at all, what follows the head is parsed at once, as the next request.
  if (declared < c.body.length) return declared === 0 ? { type: "node", status: 400 } : bodyError;
  return c.finish === "hold" ? reply : { type: "node", status: 400 };
}
