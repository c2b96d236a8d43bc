import type { IncomingMessage, ServerResponse } from "node:http";
import type { ConnectError } from "@connectrpc/connect";
import { isBillingUnknown, sluiceError } from "../../errors/catalogue.ts";
import { bodyTooLarge, httpErrorFor } from "../../errors/http.ts";
import { MAX_BODY_DEPTH, nestsWithin } from "../../protocol/json-depth.ts";
import { declaredTooLarge, readBodyWithin } from "../body.ts";
import { coreCall, rateLimitHeadersOf, type EdgeDeps, type EdgeRequest } from "../context.ts";
import { writeCoreError, writeError, writeJson } from "../respond.ts";
import { finishName, finishOf } from "../../protocol/finish-reason.ts";
import { noteUsage, streamChat, usageJson } from "./stream.ts";
import { fromWire } from "./wire.ts";

/** The abort reason of a caller that left: one shared value, so leaving builds no exception. */
const CALLER_GONE = Object.freeze(new Error("the caller went away"));

/**
 * Refuses a body the edge could not translate, after charging the rate limit the way the core
 * would have (DESIGN: 429 comes before 400). A rate-limited caller gets its 429 instead.
 */
async function refuseBody(res: ServerResponse, deps: EdgeDeps, r: EdgeRequest, refusal: ConnectError): Promise<void> {
  let headers: Record<string, string> = { "x-request-id": r.requestId };
  try {
    await deps.clients.identity.getCaller(
      {},
      {
        ...coreCall(r),
        onHeader: (h) => {
          headers = { ...headers, ...rateLimitHeadersOf(h) };
        },
      },
    );
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
export async function handleChat(
  req: IncomingMessage,
  res: ServerResponse,
  deps: EdgeDeps,
  r: EdgeRequest,
): Promise<void> {
  const base = { "x-request-id": r.requestId };
  // A caller may leave at any stage, before the call reaches the core included: the signal
  // is wired first, so the core hears of it whenever it happens.
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort(CALLER_GONE);
  };
  res.on("close", onClose);
  try {
    await chat(req, res, deps, r, base, abort.signal);
  } finally {
    res.off("close", onClose);
  }
}

/** The call itself, with the caller's departure as `signal`. */
async function chat(
  req: IncomingMessage,
  res: ServerResponse,
  deps: EdgeDeps,
  r: EdgeRequest,
  base: Record<string, string>,
  signal: AbortSignal,
): Promise<void> {
  if (r.authorization === undefined)
    return writeError(res, httpErrorFor("missing_bearer_token", deps.links), base, true);
  if (declaredTooLarge(req)) return writeError(res, bodyTooLarge(), base, true);
  try {
    const caller = await deps.clients.identity.checkApiKey({}, coreCall(r));
    r.facts.accountId = caller.accountId;
    r.facts.apiKeyId = caller.apiKeyId;
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
  if (!nestsWithin(body, MAX_BODY_DEPTH)) {
    return refuseBody(
      res,
      deps,
      r,
      sluiceError("invalid_request_body", { message: `the body nests deeper than ${MAX_BODY_DEPTH} levels` }),
    );
  }
  const wire = fromWire(body as Record<string, unknown>);
  if ("field" in wire) {
    return refuseBody(
      res,
      deps,
      r,
      sluiceError("invalid_request_body", {
        message: `${wire.field}: ${wire.message}`,
        metadata: { field: wire.field },
      }),
    );
  }

  const keyed = { ...base };
  // The model asked for; the answer names the one served (the default, when none was asked for).
  if (wire.params.model) r.facts.model = wire.params.model;
  if (signal.aborted) return;
  const options = { ...coreCall(r), signal, onHeader: (h: Headers) => Object.assign(keyed, rateLimitHeadersOf(h)) };
  try {
    if (!wire.stream) {
      const out = await deps.clients.completion.createChatCompletion({ params: wire.params }, options);
      noteUsage(r.facts, out.usage);
      r.facts.responseId = out.id;
      r.facts.model = out.model;
      r.facts.finishReasons = out.choices.map((c) => finishName(c.finishReason));
      return writeJson(
        res,
        200,
        {
          id: out.id,
          object: "chat.completion",
          created: Number(out.created),
          model: out.model,
          choices: out.choices.map((c) => ({
            index: c.index,
            message: {
              role: "assistant",
              content: c.content,
              ...(c.toolCalls.length > 0 && { tool_calls: c.toolCalls }),
            },
            logprobs: c.logprobs ?? null,
            finish_reason: finishOf(c.finishReason),
          })),
          usage: usageJson(out.usage),
        },
        keyed,
      );
    }
    const events = deps.clients.completion.streamChatCompletion({ params: wire.params }, options);
    await streamChat(res, deps, events, keyed, r.facts);
  } catch (err) {
    if (signal.aborted) return;
    if (isBillingUnknown(err)) {
      res.destroy();
      return;
    }
    writeCoreError(res, err, deps.links, keyed, false);
  }
}
