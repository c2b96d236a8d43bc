import { fromJson, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import type { ChatParamsSchema } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { MAX_STRUCT_DEPTH, nestsWithin } from "../../protocol/json-depth.ts";

/**
 * The JSON shape of `POST /v1/chat/completions`, as the OpenAI API accepts it, and its
 * translation into `ChatParams`. This module checks types only; every rule (ranges,
 * required fields, limits) belongs to the core, which applies it to gRPC callers too.
 *
 * Unknown fields are dropped, never forwarded upstream, as many OpenAI-compatible servers do,
 * so that clients sending newer parameters keep working and the upstream sees only what
 * Sluice validated; text parts of array content are joined with newlines.
 */
const nullable = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const content = z.union([z.string(), z.array(textPart).transform((parts) => parts.map((p) => p.text).join("\n"))]);

const jsonObject = z
  .record(z.string(), z.json())
  .refine((v) => nestsWithin(v, MAX_STRUCT_DEPTH), `nests deeper than ${MAX_STRUCT_DEPTH} levels`);

const message = z.object({
  role: z.string(),
  content: nullable(content),
  name: nullable(z.string()),
  tool_call_id: nullable(z.string()),
  tool_calls: nullable(z.array(jsonObject)),
});

/** SPEC: a max_tokens that is not a positive integer means "no limit given" (4,096). */
const maxTokens = z
  .unknown()
  .optional()
  .transform((v) => (typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? BigInt(v) : undefined));

const request = z.object({
  model: nullable(z.string()),
  messages: nullable(z.array(message)),
  prompt: nullable(z.union([z.string(), z.array(z.string()).transform((p) => p.join("\n"))])),
  stream: nullable(z.boolean()),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature: nullable(z.number()),
  top_p: nullable(z.number()),
  stop: nullable(z.union([z.string().transform((s) => [s]), z.array(z.string())])),
  seed: nullable(z.number().int()),
  user: nullable(z.string()),
  presence_penalty: nullable(z.number()),
  frequency_penalty: nullable(z.number()),
  n: nullable(
    z
      .number()
      .int()
      .min(-(2 ** 31))
      .max(2 ** 31 - 1),
  ),
  tools: nullable(z.array(jsonObject)),
  tool_choice: nullable(z.union([z.string(), jsonObject])),
  response_format: nullable(jsonObject),
  logprobs: nullable(z.boolean()),
  top_logprobs: nullable(
    z
      .number()
      .int()
      .min(-(2 ** 31))
      .max(2 ** 31 - 1),
  ),
});

/** A translated chat request: the core's params and whether to stream. */
export interface WireChat {
  params: MessageInitShape<typeof ChatParamsSchema>;
  stream: boolean;
}

/** A type error in the body, naming the field. */
export interface WireError {
  field: string;
  message: string;
}

/** Translates a parsed JSON object into `ChatParams`; returns the first type error instead. */
export function fromWire(body: Record<string, unknown>): WireChat | WireError {
  const parsed = request.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { field: issue?.path.join(".") ?? "", message: issue?.message ?? "invalid" };
  }
  const b = parsed.data;
  const maxTokensValue = b.max_tokens ?? b.max_completion_tokens;
  return {
    stream: b.stream ?? false,
    params: {
      model: b.model ?? "",
      messages: (b.messages ?? []).map((m) => ({
        role: m.role,
        content: m.content ?? "",
        ...(m.name !== undefined && { name: m.name }),
        ...(m.tool_call_id !== undefined && { toolCallId: m.tool_call_id }),
        ...(m.tool_calls !== undefined && { toolCalls: m.tool_calls }),
      })),
      ...(b.prompt !== undefined && { prompt: b.prompt }),
      ...(maxTokensValue !== undefined && { maxTokens: maxTokensValue }),
      ...(b.temperature !== undefined && { temperature: b.temperature }),
      ...(b.top_p !== undefined && { topP: b.top_p }),
      stop: b.stop ?? [],
      ...(b.seed !== undefined && { seed: BigInt(b.seed) }),
      ...(b.user !== undefined && { user: b.user }),
      ...(b.presence_penalty !== undefined && { presencePenalty: b.presence_penalty }),
      ...(b.frequency_penalty !== undefined && { frequencyPenalty: b.frequency_penalty }),
      ...(b.n !== undefined && { n: b.n }),
      ...(b.tools !== undefined && { tools: b.tools }),
      ...(b.tool_choice !== undefined && { toolChoice: fromJson(ValueSchema, b.tool_choice) }),
      ...(b.response_format !== undefined && { responseFormat: b.response_format }),
      ...(b.logprobs !== undefined && { logprobs: b.logprobs }),
      ...(b.top_logprobs !== undefined && { topLogprobs: b.top_logprobs }),
    },
  };
}
