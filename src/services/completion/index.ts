import type { ServiceImpl } from "@connectrpc/connect";
import { fromJson, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import {
  CompletionService, FinishReason,
  type CreateChatCompletionResponseSchema, type StreamChatCompletionResponseSchema,
} from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { requirePrincipal } from "../auth/index.ts";
import { admitCall } from "./admission.ts";
import type { CallDeps } from "./run-call.ts";
import { mergeToolCallDeltas } from "./tool-calls.ts";

type StreamOut = MessageInitShape<typeof StreamChatCompletionResponseSchema>;
type UnaryOut = MessageInitShape<typeof CreateChatCompletionResponseSchema>;

const usageOf = (p: number, c: number) => ({ promptTokens: BigInt(p), completionTokens: BigInt(c), totalTokens: BigInt(p + c) });

/**
 * The chat completion RPCs. Authentication has run in the interceptor; this service admits
 * the call (rate limit and reservation in one step), runs it, and translates its events.
 */
export function createCompletionService(deps: CallDeps): ServiceImpl<typeof CompletionService> {
  return {
    async createChatCompletion(req, ctx): Promise<UnaryOut> {
      const principal = requirePrincipal(ctx.values);
      const { header, events } = await admitCall(deps, principal, req.params, false, ctx);
      let content = "";
      let finishReason: FinishReason = FinishReason.UNSPECIFIED;
      let usage = usageOf(0, 0);
      let logprobs: JsonObject | undefined;
      const toolCalls: JsonObject[] = [];
      for await (const event of events) {
        if (event.type === "delta") {
          content += event.text;
          if (event.toolCalls) mergeToolCallDeltas(toolCalls, event.toolCalls);
        } else if (event.type === "finish") {
          finishReason = event.finishReason;
          logprobs = event.logprobs;
        } else {
          usage = usageOf(event.promptTokens, event.completionTokens);
        }
      }
      return { id: header.id, model: header.model, created: BigInt(header.created), content, finishReason, usage, toolCalls, ...(logprobs && { logprobs }) };
    },

    listModels() {
      return { models: deps.models.list().map((m) => ({ id: m.name, ownedBy: "sluice" })) };
    },

    async *streamChatCompletion(req, ctx): AsyncGenerator<StreamOut> {
      const principal = requirePrincipal(ctx.values);
      const { header, events } = await admitCall(deps, principal, req.params, true, ctx);
      const base = { id: header.id, model: header.model, created: BigInt(header.created) };
      for await (const event of events) {
        if (event.type === "delta") {
          if (event.toolCalls) yield { ...base, event: { case: "toolCalls", value: fromJson(ListValueSchema, event.toolCalls) } };
          if (event.text) yield { ...base, event: { case: "delta", value: event.text } };
        }
        else if (event.type === "finish") yield { ...base, event: { case: "finishReason", value: event.finishReason } };
        else yield { ...base, event: { case: "usage", value: usageOf(event.promptTokens, event.completionTokens) } };
      }
    },
  };
}
