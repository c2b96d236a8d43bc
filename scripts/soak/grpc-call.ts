import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import {
  ChatParamsSchema,
  CompletionService,
  type ChatParams,
} from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Told } from "./outcomes.ts";

/** Where a gRPC caller goes away: before the first event, after it, mid-stream, or on the finish. */
export type GrpcLeave =
  | { at: "none" }
  | { at: "before-first-event"; ms: number }
  | { at: "after-first-event" }
  | { at: "mid-stream"; deltas: number }
  | { at: "before-usage" };

/** A chat call straight to a core, as internal services make them. */
export interface GrpcCallPlan {
  client: Client<typeof CompletionService>;
  apiKey: string;
  stream: boolean;
  params: ChatParams;
  leave: GrpcLeave;
  timeoutMs: number;
}

/** What the caller was told, with the id when it saw one. */
export interface GrpcCallResult {
  told: Told;
  id?: string;
  detail: string;
  chunks: number;
}

/** One Completion client per core; connect-node reconnects by itself after a restart. */
export function completionClient(coreUrl: string): Client<typeof CompletionService> {
  const transport: Transport = createGrpcTransport({ baseUrl: coreUrl });
  return createClient(CompletionService, transport);
}

/** Builds `ChatParams` from plain fields (so the traffic module stays free of protobuf). */
export function chatParams(init: {
  model: string;
  messages: Array<{ role: string; content: string }>;
  maxTokens?: number;
  n: number;
}): ChatParams {
  return create(ChatParamsSchema, {
    model: init.model,
    messages: init.messages,
    n: init.n,
    ...(init.maxTokens !== undefined && { maxTokens: BigInt(init.maxTokens) }),
  });
}

/** The Sluice reason of an error; undefined when the error did not come from Sluice (a cut transport). */
function reasonOf(err: ConnectError): string | undefined {
  return err.findDetails(ErrorInfoSchema).find((d) => d.domain === "sluice")?.reason;
}

/**
 * Makes one call over gRPC and reports what the caller was told. After the first event a
 * Sluice error other than `spend_cap_exceeded` is the gRPC form of the internal-error event:
 * the core promises such a call is not billed. Never rejects.
 */
export async function grpcCall(plan: GrpcCallPlan): Promise<GrpcCallResult> {
  const abort = new AbortController();
  let left: string | undefined;
  const leave = (stage: string) => {
    if (left === undefined) {
      left = stage;
      abort.abort();
    }
  };
  const timer = setTimeout(() => leave("at the soak's timeout"), plan.timeoutMs);
  let id: string | undefined;
  let events = 0;
  let deltas = 0;
  let usage = false;
  const withId = (r: GrpcCallResult): GrpcCallResult => (id === undefined ? r : { ...r, id });
  const l = plan.leave;
  const early =
    l.at === "before-first-event"
      ? setTimeout(() => {
          if (events === 0) leave("before the first event");
        }, l.ms)
      : undefined;
  const headers = { authorization: `Bearer ${plan.apiKey}` };
  try {
    if (!plan.stream) {
      const out = await plan.client.createChatCompletion({ params: plan.params }, { headers, signal: abort.signal });
      return { told: "success", id: out.id, detail: "grpc unary", chunks: 0 };
    }
    for await (const e of plan.client.streamChatCompletion(
      { params: plan.params },
      { headers, signal: abort.signal },
    )) {
      events += 1;
      id ??= e.id;
      if (e.event.case === "delta") deltas += 1;
      if (e.event.case === "usage") usage = true;
      if (usage) continue;
      if (l.at === "after-first-event") leave("after the first event");
      else if (l.at === "mid-stream" && deltas >= l.deltas) leave("mid-stream");
      else if (l.at === "before-usage" && e.event.case === "finishReason") leave("before the usage event");
      if (left !== undefined) break;
    }
    if (usage) return withId({ told: "success", detail: "grpc stream", chunks: deltas });
    if (left !== undefined) return withId({ told: "client-left", detail: `grpc left ${left}`, chunks: deltas });
    return withId({ told: "malformed", detail: "grpc stream ended without usage", chunks: deltas });
  } catch (err) {
    if (usage) return withId({ told: "success", detail: "grpc stream", chunks: deltas });
    if (left !== undefined) return withId({ told: "client-left", detail: `grpc left ${left}`, chunks: deltas });
    const e = ConnectError.from(err);
    const reason = reasonOf(e);
    if (reason === undefined) {
      const refused = e.code === Code.Unavailable && /ECONNREFUSED/.test(e.message) && events === 0;
      return withId({
        told: refused ? "unreachable" : "cut-off",
        detail: `grpc ${Code[e.code]} without ErrorInfo`,
        chunks: deltas,
      });
    }
    if (events === 0) return { told: "error-status", detail: `grpc ${reason}`, chunks: 0 };
    if (reason === "spend_cap_exceeded")
      return withId({ told: "spend-cap-abort", detail: "grpc spend_cap_exceeded", chunks: deltas });
    return withId({ told: "internal-error", detail: `grpc mid-stream ${reason}`, chunks: deltas });
  } finally {
    clearTimeout(timer);
    clearTimeout(early);
  }
}
