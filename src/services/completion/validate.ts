import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import type { ChatParams } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { DEFAULT_MODEL } from "../../engines/models.ts";
import { sluiceError } from "../../errors/catalogue.ts";
import { MAX_STRUCT_DEPTH, nestsWithin } from "../../protocol/json-depth.ts";

/** The most choices one call may ask for: each multiplies the worst-case cost. */
export const MAX_CHOICES = 8;

/** The max_tokens ceiling of SPEC: higher, missing, zero or non-integer values mean this. */
export const MAX_TOKENS_CEILING = 4096;

const roles = z.enum(["system", "developer", "user", "assistant", "tool", "function"]);

const json = z.custom<JsonObject>(
  (v) => typeof v === "object" && v !== null && !Array.isArray(v) && nestsWithin(v, MAX_STRUCT_DEPTH),
  `must be an object nesting at most ${MAX_STRUCT_DEPTH} levels`,
);

/** Stands for a tool_choice Value that has no JSON form; the schema refuses it. */
const NO_JSON = Symbol("no JSON form");

/**
 * The JSON of a `google.protobuf.Value`, or undefined when it has none: a binary caller can
 * send a Value with no kind set, or a NaN or infinite number, which `toJson` refuses by
 * throwing. Such a tool_choice is a field error, not an internal one.
 */
function valueJson(value: NonNullable<ChatParams["toolChoice"]>): JsonValue | undefined {
  try {
    return toJson(ValueSchema, value);
  } catch {
    return undefined;
  }
}

const messageSchema = z.object({
  role: roles,
  content: z.string(),
  name: z.string().min(1).max(256).optional(),
  toolCallId: z.string().min(1).max(256).optional(),
  toolCalls: z.array(json).max(128).optional(),
});

/**
 * The rules every chat call obeys, whether it came over HTTP or gRPC. Sampling parameters
 * follow the OpenAI API's ranges; out-of-range values are refused, not silently clamped,
 * except max_tokens, which SPEC clamps.
 */
const chatSchema = z
  .object({
    model: z
      .string()
      .max(256)
      .transform((m) => m || DEFAULT_MODEL),
    messages: z.array(messageSchema).max(100_000),
    prompt: z.string().optional(),
    maxTokens: z
      .bigint()
      .optional()
      .transform((v) =>
        v === undefined || v <= 0n || v > BigInt(MAX_TOKENS_CEILING) ? MAX_TOKENS_CEILING : Number(v),
      ),
    temperature: z.number().min(0).max(2).optional(),
    topP: z.number().min(0).max(1).optional(),
    stop: z.array(z.string().min(1)).max(4),
    seed: z.bigint().optional(),
    user: z.string().max(512).optional(),
    presencePenalty: z.number().min(-2).max(2).optional(),
    frequencyPenalty: z.number().min(-2).max(2).optional(),
    n: z
      .number()
      .int()
      .min(1)
      .max(MAX_CHOICES, `n must be between 1 and ${MAX_CHOICES}`)
      .optional()
      .transform((v) => v ?? 1),
    tools: z.array(json).max(128).optional(),
    toolChoice: z
      .custom<JsonValue>((v) => typeof v === "string" || json.safeParse(v).success, "must be a string or an object")
      .optional(),
    responseFormat: json.optional(),
    logprobs: z.boolean().optional(),
    topLogprobs: z.number().int().min(0).max(20).optional(),
  })
  .superRefine((p, ctx) => {
    if (p.messages.length === 0 && p.prompt === undefined)
      ctx.addIssue({ code: "custom", path: ["messages"], message: "messages or prompt is required" });
    if (p.messages.length > 0 && p.prompt !== undefined)
      ctx.addIssue({ code: "custom", path: ["prompt"], message: "give messages or prompt, not both" });
  })
  .transform(({ prompt, messages, ...rest }) => ({
    ...rest,
    messages: prompt === undefined ? messages : [{ role: "user" as const, content: prompt }],
  }));

/** A validated, normalized chat call. */
export type ChatCall = z.infer<typeof chatSchema>;

/** Validates a call's parameters; throws 400 `invalid_request_body` naming the first bad field. */
export function validateChatParams(params: ChatParams | undefined): ChatCall {
  const parsed = chatSchema.safeParse({
    model: params?.model ?? "",
    messages: (params?.messages ?? []).map((m) => ({
      role: m.role,
      content: m.content,
      name: m.name,
      toolCallId: m.toolCallId,
      ...(m.toolCalls.length > 0 && { toolCalls: m.toolCalls }),
    })),
    prompt: params?.prompt,
    maxTokens: params?.maxTokens,
    temperature: params?.temperature,
    topP: params?.topP,
    stop: params?.stop ?? [],
    seed: params?.seed,
    user: params?.user,
    presencePenalty: params?.presencePenalty,
    frequencyPenalty: params?.frequencyPenalty,
    n: params?.n,
    tools: params?.tools.length ? params.tools : undefined,
    toolChoice: params?.toolChoice ? (valueJson(params.toolChoice) ?? NO_JSON) : undefined,
    responseFormat: params?.responseFormat,
    logprobs: params?.logprobs,
    topLogprobs: params?.topLogprobs,
  });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.join(".") ?? "";
  throw sluiceError("invalid_request_body", {
    message: `${field || "request"}: ${issue?.message ?? "invalid"}`,
    metadata: { field },
  });
}
