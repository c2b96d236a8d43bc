import type { IncomingMessage, ServerResponse } from "node:http";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { FinishReason, type StreamChatCompletionResponse, type Usage } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { isBillingUnknown, reasonOf, sluiceError, STREAM_INTERNAL_ERROR, streamAbortPayload } from "../../errors/catalogue.ts";
import { bodyTooLarge, httpErrorFor } from "../../errors/http.ts";
import { declaredTooLarge, readBodyWithin } from "../body.ts";
import { coreHeaders, rateLimitHeadersOf, type EdgeDeps, type EdgeRequest } from "../context.ts";
import { writeCoreError, writeError, writeJson } from "../respond.ts";
import { createSseWriter } from "../sse.ts";
import { fromWire } from "./wire.ts";

const FINISH: Record<FinishReason, string | null> = {
  [FinishReason.UNSPECIFIED]: null,
  [FinishReason.STOP]: "stop",
  [FinishReason.LENGTH]: "length",
  [FinishReason.TOOL_CALLS]: "tool_calls",
  [FinishReason.CONTENT_FILTER]: "content_filter",
};
const finishOf = (reason: FinishReason): string | null => FINISH[reason] ?? null;

const usageJson = (u: Usage | undefined) => ({
  prompt_tokens: Number(u?.promptTokens ?? 0n),
  completion_tokens: Number(u?.completionTokens ?? 0n),
  total_tokens: Number(u?.totalTokens ?? 0n),
});

/** The deepest JSON nesting accepted; deeper bodies would only exhaust recursive code paths. */
const MAX_JSON_DEPTH = 64;

/** How deeply a parsed JSON value nests, computed without recursion. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() ?? [undefined, 0];
    if (typeof v !== "object" || v === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > MAX_JSON_DEPTH) return deepest;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * Refuses a body the edge could not translate, after charging the rate limit the way the core
 * would have (DESIGN: 429 comes before 400). A rate-limited caller gets its 429 instead.
 */
async function refuseBody(res: ServerResponse, deps: EdgeDeps, r: EdgeRequest, refusal: ConnectError): Promise<void> {
  let headers: Record<string, string> = { "x-request-id": r.requestId };
  try {
    await deps.clients.identity.getCaller({}, { headers: coreHeaders(r), onHeader: (h) => { headers = { ...headers, ...rateLimitHeadersOf(h) }; } });
  } catch (err) {
    return writeCoreError(res, err, deps.links, headers, false);
  }
  writeCoreError(res, refusal, deps.links, headers, false);
}

/**
 * `POST /v1/chat/completions`, in DESIGN's check order: the bearer and the declared size are
 * checked, then the core checks the key (`CheckApiKey`, the named step that does not charge
 * the rate limit), and only then is the body read, parsed and handed to the core, which charges
 * the rate limit together with the call's reservation and applies every other rule.
 */
export async function handleChat(req: IncomingMessage, res: ServerResponse, deps: EdgeDeps, r: EdgeRequest): Promise<void> {
  const base = { "x-request-id": r.requestId };
  // A caller may leave at any stage, before the call reaches the core included: the signal
  // is wired first, so the core hears of it whenever it happens.
  const abort = new AbortController();
  const onClose = () => { if (!res.writableFinished) abort.abort(CALLER_GONE); };
  res.on("close", onClose);
  try {
    await chat(req, res, deps, r, base, abort.signal);
  } finally {
    res.off("close", onClose);
  }
}

/** The abort reason of a caller that left: one shared value, so leaving builds no exception. */
const CALLER_GONE = Object.freeze(new Error("the caller went away"));

/**
 * Whether an error leaves a stream's billing unknown to the edge: the core said so, or the
 * core's own answer was lost (a transport failure carries no Sluice reason). The caller is
 * then told nothing rather than "not billed": its connection is cut.
 */
const billingUnknownTo = (err: unknown) => isBillingUnknown(err) || reasonOf(err) === undefined;

async function chat(req: IncomingMessage, res: ServerResponse, deps: EdgeDeps, r: EdgeRequest, base: Record<string, string>, signal: AbortSignal): Promise<void> {
  if (r.authorization === undefined) return writeError(res, httpErrorFor("missing_bearer_token", deps.links), base, true);
  if (declaredTooLarge(req)) return writeError(res, bodyTooLarge(), base, true);
  try {
    await deps.clients.identity.checkApiKey({}, { headers: coreHeaders(r) });
  } catch (err) {
    return writeCoreError(res, err, deps.links, base, true);
  }

  let raw: Buffer | undefined;
  try {
    raw = await readBodyWithin(req);
  } catch {
    return; // The client went away mid-body: nobody is left to answer.
  }
  if (raw === undefined) return writeError(res, bodyTooLarge(), base, true);
  let body: unknown;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    return refuseBody(res, deps, r, sluiceError("invalid_json_body"));
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return refuseBody(res, deps, r, sluiceError("body_must_be_object"));
  }
  if (depthOf(body) > MAX_JSON_DEPTH) {
    return refuseBody(res, deps, r, sluiceError("invalid_request_body", { message: `the body nests deeper than ${MAX_JSON_DEPTH} levels` }));
  }
  const wire = fromWire(body as Record<string, unknown>);
  if ("field" in wire) {
    return refuseBody(res, deps, r, sluiceError("invalid_request_body", { message: `${wire.field}: ${wire.message}`, metadata: { field: wire.field } }));
  }

  const keyed = { ...base };
  if (signal.aborted) return;
  const options = { headers: coreHeaders(r), signal, onHeader: (h: Headers) => Object.assign(keyed, rateLimitHeadersOf(h)) };
  try {
    if (!wire.stream) {
      const out = await deps.clients.completion.createChatCompletion({ params: wire.params }, options);
      return writeJson(res, 200, {
        id: out.id,
        object: "chat.completion",
        created: Number(out.created),
        model: out.model,
        choices: (out.choices.length > 0 ? out.choices : [{ index: 0, ...out }]).map((c) => ({
          index: c.index,
          message: { role: "assistant", content: c.content, ...(c.toolCalls.length > 0 && { tool_calls: c.toolCalls }) },
          logprobs: c.logprobs ?? null,
          finish_reason: finishOf(c.finishReason),
        })),
        usage: usageJson(out.usage),
      }, keyed);
    }
    await streamChat(res, deps, deps.clients.completion.streamChatCompletion({ params: wire.params }, options), keyed);
  } catch (err) {
    if (signal.aborted) return;
    if (isBillingUnknown(err)) {
      res.destroy();
      return;
    }
    writeCoreError(res, err, deps.links, keyed, false);
  }
}

/** How long a delta may wait for the next event before it is sent without the finish reason. */
const HOLD_MS = 25;

/**
 * Streams core events as SSE. The 200 is sent with the first event (or the first keep-alive),
 * so that errors before it keep their HTTP status. Each delta is held briefly so that the
 * last content chunk can carry the finish reason, as DESIGN requires; a delta that waits
 * longer than HOLD_MS (a slow engine) is sent on its own, so a stall never hides a token.
 */
async function streamChat(res: ServerResponse, deps: EdgeDeps, events: AsyncIterable<StreamChatCompletionResponse>, headers: Record<string, string>): Promise<void> {
  const sse = createSseWriter(res, deps.keepAliveMs);
  // A slow first token: open the stream and show it is alive, so proxies keep the connection.
  const firstWait = setTimeout(() => {
    sse.open(headers);
    sse.keepAlive();
  }, deps.keepAliveMs);
  let held: { event: StreamChatCompletionResponse; text: string } | undefined;
  let holdTimer: NodeJS.Timeout | undefined;
  // The first delta of each choice carries the role.
  const sentRole = new Set<number>();
  const chunk = (e: StreamChatCompletionResponse, delta: Record<string, JsonValue>, finish: string | null) => {
    const index = e.choiceIndex;
    sse.data({
      id: e.id, object: "chat.completion.chunk", created: Number(e.created), model: e.model,
      choices: [{ index, delta: sentRole.has(index) ? delta : { role: "assistant", ...delta }, logprobs: null, finish_reason: finish }],
    });
    sentRole.add(index);
  };
  /** Sends the held delta; with `finish`, it closes the choice of `e` (a held delta of another choice goes first). */
  const flush = (finish: string | null = null, e?: StreamChatCompletionResponse) => {
    clearTimeout(holdTimer);
    const h = held;
    held = undefined;
    if (h && (!e || h.event.choiceIndex === e.choiceIndex)) return chunk(h.event, { content: h.text }, finish);
    if (h) chunk(h.event, { content: h.text }, null);
    if (e) chunk(e, { content: "" }, finish);
  };
  try {
    for await (const e of events) {
      // Any event means the core admitted the call: from here on, errors are SSE events.
      sse.open(headers);
      if (e.event.case === "delta") {
        flush();
        held = { event: e, text: e.event.value };
        holdTimer = setTimeout(() => flush(), HOLD_MS);
      } else if (e.event.case === "toolCalls") {
        flush();
        chunk(e, { tool_calls: toJson(ListValueSchema, e.event.value) }, null);
      } else if (e.event.case === "finishReason") {
        flush(finishOf(e.event.value), e);
      } else if (e.event.case === "usage") {
        flush();
        sse.data({ id: e.id, object: "chat.completion.chunk", created: Number(e.created), model: e.model, choices: [], usage: usageJson(e.event.value) });
      }
      // Backpressure: a full socket pauses the call (the core's engine waits for this loop);
      // a reader stuck past the write timeout is cut, and the core releases the call unbilled.
      if (sse.full && !(await sse.drained(deps.writeTimeoutMs))) {
        res.destroy();
        return;
      }
    }
    sse.open(headers);
    sse.data("[DONE]");
  } catch (err) {
    if (!sse.opened) throw err;
    // Chunks the core produced are delivered before the error: they are the billed ones.
    flush();
    if (reasonOf(err) === "spend_cap_exceeded") {
      sse.event("error", streamAbortPayload("spend_cap_exceeded", deps.links));
    } else if (billingUnknownTo(err)) {
      deps.logger.warn("stream cut with its billing unknown", { error: err instanceof Error ? err.message : String(err) });
      res.destroy();
    } else {
      deps.logger.warn("stream failed after start", { error: err instanceof Error ? err.message : String(err) });
      sse.data(STREAM_INTERNAL_ERROR);
      sse.data("[DONE]");
    }
  } finally {
    clearTimeout(firstWait);
    clearTimeout(holdTimer);
    // A stream that never opened leaves the response to the caller, which writes the error.
    if (sse.opened) sse.close();
  }
}
