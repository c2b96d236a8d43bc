import type { JsonObject } from "@bufbuild/protobuf";
import type { EngineRequest } from "../engine.ts";

/**
 * The body sent upstream. Always streamed, with `stream_options.include_usage`, whether the
 * caller streams or not: one code path, usage from the model server when it reports it, and
 * timeouts that can tell a slow model from a dead one. Only parameters Sluice validated are
 * sent; unknown client fields never reach the upstream.
 */
export function upstreamBody(request: EngineRequest, upstreamModel: string): JsonObject {
  const body: JsonObject = {
    model: upstreamModel,
    messages: request.messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.name !== undefined && { name: m.name }),
      ...(m.toolCallId !== undefined && { tool_call_id: m.toolCallId }),
      ...(m.toolCalls !== undefined && { tool_calls: m.toolCalls }),
    })),
    max_tokens: request.maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  };
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  if (request.stop.length > 0) body.stop = request.stop;
  if (request.seed !== undefined) body.seed = Number(request.seed);
  if (request.presencePenalty !== undefined) body.presence_penalty = request.presencePenalty;
  if (request.frequencyPenalty !== undefined) body.frequency_penalty = request.frequencyPenalty;
  if (request.user !== undefined) body.user = request.user;
  if (request.tools !== undefined) body.tools = request.tools;
  if (request.toolChoice !== undefined) body.tool_choice = request.toolChoice;
  if (request.responseFormat !== undefined) body.response_format = request.responseFormat;
  if (request.logprobs !== undefined) body.logprobs = request.logprobs;
  if (request.topLogprobs !== undefined) body.top_logprobs = request.topLogprobs;
  if (request.n !== undefined && request.n > 1) body.n = request.n;
  return body;
}
