import type { ServiceImpl } from "@connectrpc/connect";
import { fromJson, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type CompletionService,
  FinishReason,
  type CreateChatCompletionResponseSchema,
  type StreamChatCompletionResponseSchema,
} from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { requirePrincipal } from "../auth/index.ts";
import { openCall, type CallDeps } from "./call.ts";
import { mergeToolCallDeltas } from "./tool-calls.ts";
import { MAX_CHOICES } from "./validate.ts";

type StreamOut = MessageInitShape<typeof StreamChatCompletionResponseSchema>;
type UnaryOut = MessageInitShape<typeof CreateChatCompletionResponseSchema>;
/** One answer as the unary call gathers it. */
interface ChoiceOut {
  index: number;
  content: string;
  finishReason: FinishReason;
  toolCalls: JsonObject[];
  /** Where each engine tool-call index landed in `toolCalls`. */
  slots: Map<number, number>;
  logprobs?: JsonObject;
}

const usageOf = (p: number, c: number, cost = 0) => ({
  promptTokens: BigInt(p),
  completionTokens: BigInt(c),
  totalTokens: BigInt(p + c),
  costUsdMicros: BigInt(cost),
});

/**
 * The chat completion RPCs. Authentication has run in the interceptor; `openCall` owns the
 * call from its admission (rate limit and reservation in one step) to its last event, and
 * this service only translates its events into messages.
 */
export function createCompletionService(deps: CallDeps): ServiceImpl<typeof CompletionService> {
  return {
    async createChatCompletion(req, ctx): Promise<UnaryOut> {
      const principal = requirePrincipal(ctx.values);
      const { header, events } = await openCall(deps, principal, req.params, false, ctx);
      const choices: ChoiceOut[] = [];
      const choice = (index: number): ChoiceOut => {
        if (index < 0 || index >= MAX_CHOICES) throw new RangeError(`choice ${index} out of range`);
        for (let i = choices.length; i <= index; i++)
          choices.push({
            index: i,
            content: "",
            finishReason: FinishReason.UNSPECIFIED,
            toolCalls: [],
            slots: new Map(),
          });
        return choices[index] as ChoiceOut;
      };
      let usage = usageOf(0, 0);
      for await (const event of events) {
        if (event.type === "delta") {
          const c = choice(event.choice);
          c.content += event.text;
          if (event.toolCalls) mergeToolCallDeltas(c.toolCalls, event.toolCalls, c.slots);
        } else if (event.type === "finish") {
          const c = choice(event.choice);
          c.finishReason = event.finishReason;
          if (event.logprobs) c.logprobs = event.logprobs;
        } else {
          usage = usageOf(event.promptTokens, event.completionTokens, event.costUsdMicros);
        }
      }
      const first = choice(0);
      return {
        id: header.id,
        model: header.model,
        created: BigInt(header.created),
        usage,
        // Deprecated in the proto (the answer is `choices`): still filled with choice 0 for clients
        // built before `choices` existed. Nothing in Sluice reads them.
        content: first.content,
        finishReason: first.finishReason,
        toolCalls: first.toolCalls,
        ...(first.logprobs && { logprobs: first.logprobs }),
        choices: choices.map(({ slots: _slots, ...c }) => c),
      };
    },

    listModels() {
      return { models: deps.models.list().map((m) => ({ id: m.name, ownedBy: "sluice" })) };
    },

    async *streamChatCompletion(req, ctx): AsyncGenerator<StreamOut> {
      const principal = requirePrincipal(ctx.values);
      const { header, events } = await openCall(deps, principal, req.params, true, ctx);
      const base = { id: header.id, model: header.model, created: BigInt(header.created) };
      for await (const event of events) {
        if (event.type === "delta") {
          const at = { ...base, choiceIndex: event.choice };
          const last = event.last === undefined ? {} : { last: event.last };
          if (event.toolCalls)
            yield { ...at, event: { case: "toolCalls", value: fromJson(ListValueSchema, event.toolCalls) } };
          if (event.text) yield { ...at, ...last, event: { case: "delta", value: event.text } };
        } else if (event.type === "finish") {
          yield { ...base, choiceIndex: event.choice, event: { case: "finishReason", value: event.finishReason } };
        } else {
          yield {
            ...base,
            event: { case: "usage", value: usageOf(event.promptTokens, event.completionTokens, event.costUsdMicros) },
          };
        }
      }
    },
  };
}
