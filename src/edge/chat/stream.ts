import type { ServerResponse } from "node:http";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import type { StreamChatCompletionResponse, Usage } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { isBillingUnknown, reasonOf, STREAM_INTERNAL_ERROR } from "../../errors/catalogue.ts";
import { streamAbortPayload } from "../../errors/envelope.ts";
import { type CallFacts, markFirstToken, startFacts } from "../../call-facts.ts";
import { noteReason } from "../access.ts";
import type { EdgeDeps } from "../context.ts";
import { createSseWriter } from "../sse.ts";
import { finishName, finishOf } from "../../protocol/finish-reason.ts";

/** The OpenAI `usage` object of a usage event. */
export const usageJson = (u: Usage | undefined) => ({
  prompt_tokens: Number(u?.promptTokens ?? 0n),
  completion_tokens: Number(u?.completionTokens ?? 0n),
  total_tokens: Number(u?.totalTokens ?? 0n),
});

/** Records a call's billed usage in its facts, for the access line and the span. */
export function noteUsage(facts: CallFacts, u: Usage | undefined): void {
  if (!u) return;
  facts.promptTokens = Number(u.promptTokens);
  facts.completionTokens = Number(u.completionTokens);
  facts.costUsdMicros = Number(u.costUsdMicros);
}

/**
 * Whether an error leaves a stream's billing unknown to the edge: the core said so, or the
 * core's own answer was lost (a transport failure carries no Sluice reason). The caller is
 * then told nothing rather than "not billed": its connection is cut.
 */
const billingUnknownTo = (err: unknown) => isBillingUnknown(err) || reasonOf(err) === undefined;

/** What streaming needs of the edge's dependencies. */
export type StreamDeps = Pick<EdgeDeps, "keepAliveMs" | "writeTimeoutMs" | "logger" | "links" | "metrics">;

/** How long a delta of unknown place may wait for the next event before it goes out alone. */
const HOLD_MS = 25;

type Held = { event: StreamChatCompletionResponse; text: string };

/**
 * Streams core events as SSE. The 200 is sent with the first event (or the first keep-alive),
 * so that errors before it keep their HTTP status. DESIGN puts `finish_reason` on the last
 * content chunk of each choice:
 * - a delta the engine marks as the last of its choice waits, with no timer, for its finish;
 * - a delta marked as not the last goes out at once;
 * - a delta of unknown place (an upstream that tells the finish late) is held up to HOLD_MS,
 *   so a stall never hides a token.
 * Writes are batched per tick by the SSE writer, and a full socket pauses the call.
 */
export async function streamChat(
  res: ServerResponse,
  deps: StreamDeps,
  events: AsyncIterable<StreamChatCompletionResponse>,
  headers: Record<string, string>,
  facts: CallFacts = startFacts(),
): Promise<void> {
  const sse = createSseWriter(res, deps.keepAliveMs);
  deps.metrics?.streams("edge", 1);
  // A slow first token: open the stream and show it is alive, so proxies keep the connection.
  const firstWait = setTimeout(() => {
    sse.open(headers);
    sse.keepAlive();
  }, deps.keepAliveMs);
  /** The last delta of each choice, waiting for its finish. */
  const lastOf = new Map<number, Held>();
  let timed: Held | undefined;
  let holdTimer: NodeJS.Timeout | undefined;
  // The first delta of each choice carries the role.
  const sentRole = new Set<number>();
  const chunk = (e: StreamChatCompletionResponse, delta: Record<string, JsonValue>, finish: string | null) => {
    const index = e.choiceIndex;
    sse.data({
      id: e.id,
      object: "chat.completion.chunk",
      created: Number(e.created),
      model: e.model,
      choices: [
        {
          index,
          delta: sentRole.has(index) ? delta : { role: "assistant", ...delta },
          logprobs: null,
          finish_reason: finish,
        },
      ],
    });
    sentRole.add(index);
  };
  const sendTimed = () => {
    clearTimeout(holdTimer);
    const h = timed;
    timed = undefined;
    if (h) chunk(h.event, { content: h.text }, null);
  };
  /** Sends everything held, without finish reasons (before a usage chunk or an error). */
  const sendAll = () => {
    sendTimed();
    for (const h of lastOf.values()) chunk(h.event, { content: h.text }, null);
    lastOf.clear();
  };
  /** Closes choice `e.choiceIndex` with its finish reason, on its held delta when there is one. */
  const finish = (e: StreamChatCompletionResponse, reason: string | null) => {
    const index = e.choiceIndex;
    const last = lastOf.get(index);
    if (last) {
      lastOf.delete(index);
      return chunk(last.event, { content: last.text }, reason);
    }
    if (timed?.event.choiceIndex === index) {
      const h = timed;
      clearTimeout(holdTimer);
      timed = undefined;
      return chunk(h.event, { content: h.text }, reason);
    }
    sendTimed();
    chunk(e, { content: "" }, reason);
  };
  try {
    for await (const e of events) {
      // Any event means the core admitted the call: from here on, errors are SSE events.
      sse.open(headers);
      if (facts.responseId === undefined) {
        facts.responseId = e.id;
        facts.model = e.model;
      }
      if (e.event.case === "delta") {
        markFirstToken(facts);
        sendTimed();
        const held = { event: e, text: e.event.value };
        if (e.last === true) lastOf.set(e.choiceIndex, held);
        else if (e.last === false) chunk(e, { content: held.text }, null);
        else {
          timed = held;
          holdTimer = setTimeout(sendTimed, HOLD_MS);
        }
      } else if (e.event.case === "toolCalls") {
        sendTimed();
        chunk(e, { tool_calls: toJson(ListValueSchema, e.event.value) }, null);
      } else if (e.event.case === "finishReason") {
        finish(e, finishOf(e.event.value));
        facts.finishReasons ??= [];
        facts.finishReasons.push(finishName(e.event.value));
      } else if (e.event.case === "usage") {
        noteUsage(facts, e.event.value);
        sendAll();
        sse.data({
          id: e.id,
          object: "chat.completion.chunk",
          created: Number(e.created),
          model: e.model,
          choices: [],
          usage: usageJson(e.event.value),
        });
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
    // A caller that left has nobody to tell: its call was cancelled (or, complete, billed).
    if (reasonOf(err) === "canceled") return;
    noteReason(res, reasonOf(err) ?? "internal_error");
    // Chunks the core produced are delivered before the error: they are the billed ones.
    sendAll();
    if (reasonOf(err) === "spend_cap_exceeded") {
      sse.event("error", streamAbortPayload("spend_cap_exceeded", deps.links, ConnectError.from(err).rawMessage));
    } else if (billingUnknownTo(err)) {
      deps.logger.warn("stream cut with its billing unknown", {
        requestId: headers["x-request-id"],
        error: err instanceof Error ? err.message : String(err),
      });
      res.destroy();
    } else {
      deps.logger.warn("stream failed after start", {
        requestId: headers["x-request-id"],
        error: err instanceof Error ? err.message : String(err),
      });
      sse.data(STREAM_INTERNAL_ERROR);
      sse.data("[DONE]");
    }
  } finally {
    deps.metrics?.streams("edge", -1);
    clearTimeout(firstWait);
    clearTimeout(holdTimer);
    // A stream that never opened leaves the response to the caller, which writes the error.
    if (sse.opened) sse.close();
  }
}
