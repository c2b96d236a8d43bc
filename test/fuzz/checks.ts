import { fromBinary, fromJsonString } from "@bufbuild/protobuf";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import { CreateChatCompletionResponseSchema } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import { CATALOGUE_ROWS, type Outcome } from "./rules-oracle.ts";
import { header, type RawResult, type Reply } from "./transports.ts";

/**
 * Checks a reply against the one outcome the oracle computed: the status, the envelope to the
 * field, the headers DESIGN puts on keyed responses, and for successes the shape and the
 * arithmetic of the answer. A mismatch throws a `Mismatch` saying what was expected and got.
 */

/** A reply that is not the documented one. */
export class Mismatch extends Error {
  override name = "Mismatch";
}

/** The short signature of a reply, for summaries: status and code (and a Connect error's reason). */
export function signatureOf(reply: Reply): string {
  const j = parseJson(reply.body);
  const code = isRecord(j)
    ? typeof j.detail === "string"
      ? j.detail
      : isRecord(j.error)
        ? j.error.code
        : j.code
    : undefined;
  let reason = "";
  if (isRecord(j) && Array.isArray(j.details)) {
    for (const d of j.details) {
      if (isRecord(d) && d.type === "google.rpc.ErrorInfo" && typeof d.value === "string")
        reason = ` ${fromBinary(ErrorInfoSchema, Buffer.from(d.value, "base64")).reason}`;
    }
  }
  return `${reply.status}${typeof code === "string" ? ` ${code}` : ""}${reason}`;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}
function fail(what: string, reply: Reply | undefined, expected: string): never {
  const got = reply
    ? `${reply.status} ${reply.reason} ${JSON.stringify(reply.headers)} ` +
      JSON.stringify(reply.body.subarray(0, 600).toString("utf8"))
    : "no reply";
  const fiveXx = reply && reply.status >= 500 ? "\n  (a 5xx: never allowed)" : "";
  throw new Mismatch(`${what}\n  expected: ${expected}\n  got: ${got}${fiveXx}`);
}
function must(cond: boolean, what: string, reply: Reply, expected: string): asserts cond {
  if (!cond) fail(what, reply, expected);
}

/** SPEC/README: what an outcome looks like on the HTTP edge, as one line. */
export function describeOutcome(o: Outcome): string {
  if (o.kind === "error") return `${CATALOGUE_ROWS[o.reason].http} ${o.reason}`;
  if (o.kind === "plain-413") return "413 plain";
  if (o.kind === "me") return `200 me(${o.accountId})`;
  return (
    `200 ${o.stream ? "stream" : "json"} n=${o.n} max_tokens=${o.maxTokens} ` +
    `prompt_tokens=${o.promptTokens.join("..")}`
  );
}

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const URL_FIELDS = ["docs_url", "resolution_url", "portal_url"] as const;

/** Usage arithmetic of a finished call: prompt tokens within the oracle's bounds, output within max_tokens. */
function checkUsage(usage: unknown, o: Extract<Outcome, { kind: "ok" }>, reply: Reply): void {
  must(isRecord(usage), "usage is missing", reply, describeOutcome(o));
  const { prompt_tokens: p, completion_tokens: c, total_tokens: t } = usage;
  must(
    typeof p === "number" && typeof c === "number" && typeof t === "number" && t === p + c,
    "usage does not add up",
    reply,
    "total = prompt + completion",
  );
  must(p >= o.promptTokens[0] && p <= o.promptTokens[1], `prompt_tokens ${p} out of bounds`, reply, describeOutcome(o));
  must(c >= 0 && c <= o.maxTokens * o.n, `completion_tokens ${c} above max_tokens × n`, reply, describeOutcome(o));
}

/**
 * Checks an edge reply. Replies after the key check carry the rate-limit headers (DESIGN);
 * `requestId` is the x-request-id sent, echoed only when it is safe.
 */
export function checkEdgeReply(
  o: Outcome,
  reply: Reply,
  ctx: { requestId: string | undefined; path: string; accountIds: { good: string; unonboarded: string } },
): void {
  const expected = describeOutcome(o);
  const id = header(reply, "x-request-id");
  const keyed =
    o.kind === "ok" ||
    (o.kind === "error" &&
      !["missing_bearer_token", "invalid_api_key", "not_found", "method_not_allowed"].includes(o.reason));
  if (o.kind === "plain-413") {
    must(reply.status === 413, "wrong status", reply, expected);
    must((header(reply, "content-type") ?? "").startsWith("text/plain"), "a plain 413 is text", reply, expected);
    must(!isRecord(parseJson(reply.body)), "a plain 413 has no envelope", reply, expected);
    return;
  }
  must(
    id !== undefined &&
      (ctx.requestId !== undefined && SAFE_ID.test(ctx.requestId)
        ? id === ctx.requestId
        : /^req_[0-9a-f-]{36}$/.test(id)),
    "x-request-id not echoed or not generated",
    reply,
    `x-request-id ${ctx.requestId ?? "(generated)"}`,
  );
  if (keyed) {
    for (const h of ["x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"])
      must(header(reply, h) !== undefined, `keyed reply lacks ${h}`, reply, expected);
  }
  const json = parseJson(reply.body);
  if (o.kind === "error") {
    const row = CATALOGUE_ROWS[o.reason];
    must(reply.status === row.http, "wrong status", reply, expected);
    must(
      (header(reply, "content-type") ?? "").startsWith("application/json"),
      "error body is not JSON",
      reply,
      expected,
    );
    if (row.envelope === "detail") {
      must(
        isRecord(json) && Object.keys(json).length === 1 && json.detail === o.reason,
        "wrong detail envelope",
        reply,
        `{"detail":"${o.reason}"}`,
      );
    } else {
      const e = isRecord(json) && Object.keys(json).length === 1 ? json.error : undefined;
      must(
        isRecord(e) &&
          e.code === o.reason &&
          e.reason === o.reason &&
          e.type === row.envelope.type &&
          typeof e.message === "string" &&
          e.message !== "",
        "wrong structured envelope",
        reply,
        `{"error":{"type":"${row.envelope.type}","code":"${o.reason}",...}}`,
      );
      must(
        URL_FIELDS.every((f) => typeof e[f] === "string" && URL.canParse(e[f])),
        "structured envelope links",
        reply,
        "docs_url, resolution_url, portal_url",
      );
    }
    if (o.reason === "method_not_allowed")
      must(
        header(reply, "allow") === (ctx.path.startsWith("/v1/me") ? "GET" : "POST"),
        "405 without Allow",
        reply,
        expected,
      );
    if (o.reason === "api_key_rate_limited") {
      must(/^[1-9]\d*$/.test(header(reply, "retry-after") ?? ""), "429 without Retry-After", reply, expected);
      const ms = header(reply, "retry-after-ms") ?? "";
      must(
        /^\d+$/.test(ms) && header(reply, "retry-after") === String(Math.max(1, Math.ceil(Number(ms) / 1000))),
        "429 without a retry-after-ms that Retry-After rounds up",
        reply,
        expected,
      );
    }
    return;
  }
  must(reply.status === 200, "wrong status", reply, expected);
  if (o.kind === "me") {
    const account = ctx.accountIds[o.accountId];
    must(
      isRecord(json) && Object.keys(json).sort().join() === "email,id" && json.email === null && json.id === account,
      "wrong /v1/me body",
      reply,
      `${expected}: {"id":"${account}","email":null}`,
    );
    return;
  }
  if (!o.stream) {
    must(
      (header(reply, "content-type") ?? "").startsWith("application/json") && isRecord(json),
      "not a JSON completion",
      reply,
      expected,
    );
    must(
      typeof json.id === "string" &&
        json.id.startsWith("chatcmpl-") &&
        json.object === "chat.completion" &&
        json.model === "service-extract",
      "completion header fields",
      reply,
      expected,
    );
    const choices = json.choices;
    must(Array.isArray(choices) && choices.length === o.n, "wrong number of choices", reply, expected);
    for (const [i, c] of (choices as unknown[]).entries()) {
      must(
        isRecord(c) &&
          c.index === i &&
          isRecord(c.message) &&
          c.message.role === "assistant" &&
          typeof c.message.content === "string" &&
          (c.finish_reason === "stop" || c.finish_reason === "length"),
        `choice ${i} malformed`,
        reply,
        expected,
      );
    }
    checkUsage(json.usage, o, reply);
    return;
  }
  must((header(reply, "content-type") ?? "").startsWith("text/event-stream"), "not an event stream", reply, expected);
  const data = reply.body
    .toString("utf8")
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice(6));
  must(data.at(-1) === "[DONE]", "stream does not end with [DONE]", reply, expected);
  const chunks = data.slice(0, -1).map((d) => parseJson(Buffer.from(d)));
  const usageChunk = chunks.at(-1);
  must(
    isRecord(usageChunk) && Array.isArray(usageChunk.choices) && usageChunk.choices.length === 0,
    "no usage chunk before [DONE]",
    reply,
    expected,
  );
  checkUsage(usageChunk.usage, o, reply);
  for (const c of chunks.slice(0, -1)) {
    must(
      isRecord(c) &&
        c.object === "chat.completion.chunk" &&
        Array.isArray(c.choices) &&
        c.choices.length === 1 &&
        isRecord(c.choices[0]) &&
        Number(c.choices[0].index) < o.n,
      "malformed chunk",
      reply,
      expected,
    );
  }
}

/** Node's own answer to a request its HTTP parser refuses: exactly these bytes, then a close. */
export function checkNodeRefusal(status: 400 | 431, raw: RawResult): void {
  const text = status === 400 ? "Bad Request" : "Request Header Fields Too Large";
  const expected = `HTTP/1.1 ${status} ${text}, Connection: close, no body, then the server closes`;
  const [reply, ...more] = raw.replies;
  if (!reply)
    throw new Mismatch(
      `no reply\n  expected: ${expected}\n  ` +
        `got: ${JSON.stringify(raw.rest.toString("latin1").slice(0, 300))}${raw.timedOut ? " (timed out)" : ""}`,
    );
  must(reply.status === status && reply.reason === text, "wrong refusal", reply, expected);
  must(
    reply.headers.length === 1 &&
      reply.headers[0]?.[0] === "connection" &&
      reply.headers[0][1] === "close" &&
      reply.body.length === 0,
    "refusal has extra headers or a body",
    reply,
    expected,
  );
  must(
    more.length === 0 && raw.rest.length === 0 && raw.closedByServer,
    "more after the refusal, or the connection stayed open",
    reply,
    expected,
  );
}

/** A connection Node closed without writing anything. */
export function checkDropped(raw: RawResult): void {
  if (raw.replies.length > 0 || raw.rest.length > 0 || !raw.closedByServer) {
    throw new Mismatch(
      `expected the connection to close with no reply\n  got: ${raw.replies.map(signatureOf).join(", ")} ` +
        `${JSON.stringify(raw.rest.toString("latin1").slice(0, 200))}${raw.closedByServer ? "" : " (still open)"}`,
    );
  }
}

/** Connect's mapping of codes to HTTP statuses (connectrpc.com/docs/protocol#error-codes). */
const CONNECT_HTTP: Record<string, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  not_found: 404,
  resource_exhausted: 429,
  failed_precondition: 400,
  unimplemented: 501,
};

/** Checks a Connect unary reply: the error code and its one `ErrorInfo`, or a decodable answer. */
export function checkConnectReply(o: Outcome, format: "json" | "binary", reply: Reply): void {
  if (o.kind === "error") {
    const code = CATALOGUE_ROWS[o.reason].connect;
    const expected = `${CONNECT_HTTP[code]} ${code} with ErrorInfo{reason: ${o.reason}, domain: sluice}`;
    const json = parseJson(reply.body);
    must(
      reply.status === CONNECT_HTTP[code] && isRecord(json) && json.code === code,
      "wrong Connect code",
      reply,
      expected,
    );
    must(Array.isArray(json.details), "Connect error without details", reply, expected);
    const infos: Array<{ reason: string; domain: string }> = [];
    let retry = 0;
    for (const d of json.details) {
      must(
        isRecord(d) && typeof d.type === "string" && typeof d.value === "string",
        "malformed detail",
        reply,
        expected,
      );
      if (d.type === "google.rpc.ErrorInfo") infos.push(fromBinary(ErrorInfoSchema, Buffer.from(d.value, "base64")));
      else if (d.type === "google.rpc.RetryInfo")
        retry += fromBinary(RetryInfoSchema, Buffer.from(d.value, "base64")).retryDelay ? 1 : 0;
      else fail(`unexpected detail ${d.type}`, reply, expected);
    }
    must(
      infos.length === 1 && infos[0]?.reason === o.reason && infos[0].domain === "sluice",
      "wrong ErrorInfo",
      reply,
      expected,
    );
    must(
      retry === (o.reason === "api_key_rate_limited" ? 1 : 0),
      "RetryInfo present iff rate limited",
      reply,
      expected,
    );
    return;
  }
  const expected = describeOutcome(o);
  must(o.kind === "ok", "the oracle has no Connect form for this outcome", reply, expected);
  must(reply.status === 200, "wrong status", reply, expected);
  const contentType = header(reply, "content-type") ?? "";
  must(
    contentType === (format === "json" ? "application/json" : "application/proto"),
    "wrong content type",
    reply,
    expected,
  );
  let out: ReturnType<typeof fromBinary<typeof CreateChatCompletionResponseSchema>>;
  try {
    out =
      format === "json"
        ? fromJsonString(CreateChatCompletionResponseSchema, reply.body.toString("utf8"))
        : fromBinary(CreateChatCompletionResponseSchema, reply.body);
  } catch (err) {
    fail(`undecodable response: ${String(err)}`, reply, expected);
  }
  must(
    out.id.startsWith("chatcmpl-") && out.model === "service-extract" && out.choices.length === o.n,
    "wrong response header or choice count",
    reply,
    expected,
  );
  const usage = out.usage;
  checkUsage(
    usage && {
      prompt_tokens: Number(usage.promptTokens),
      completion_tokens: Number(usage.completionTokens),
      total_tokens: Number(usage.totalTokens),
    },
    o,
    reply,
  );
}
