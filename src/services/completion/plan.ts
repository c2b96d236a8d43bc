import { randomUUID } from "node:crypto";
import type { EngineRequest } from "../../engines/engine.ts";
import type { Model, ModelRegistry } from "../../engines/models.ts";
import type { Tokenizer } from "../../engines/tokenizer.ts";
import { sluiceError } from "../../errors/catalogue.ts";
import type { AccountRecord, ReserveRequest, Store } from "../../store/store.ts";
import { standingReasonOf } from "../account-standing.ts";
import type { Principal } from "../auth/index.ts";
import { costUsdMicros, periodOf } from "./pricing.ts";
import type { ChatCall } from "./validate.ts";

/** What planning a call reads: the account, the models and the tokenizer. */
export interface PlanDeps {
  store: Store;
  models: ModelRegistry;
  tokenizer: Tokenizer;
  reservationTtlMs: number;
}

/** SPEC's input limit, in tokens. */
export const MAX_INPUT_TOKENS = 32_768;

/** The identity of a running call, fixed before its first event. */
export interface CallHeader {
  id: string;
  model: string;
  created: number;
}

/** Everything a call needs once it has passed the rules, before it is admitted. */
export interface CallPlan {
  account: AccountRecord;
  apiKeyId: string;
  model: Model;
  promptTokens: number;
  request: EngineRequest;
  header: CallHeader;
  period: string;
  /** The reservation to take with the admission: the key's as well as the account's. */
  reservation: ReserveRequest;
  /**
   * What the call takes from its key's tokens-per-minute budget at admission: its prompt plus
   * its reserved output (max_tokens for each choice), the worst case, as with money; its end
   * gives back what it did not use.
   */
  tokens: number;
}

/** Input sent besides message text (tool definitions and calls, formats): it is input too. */
function inputExtras(call: ChatCall): string[] {
  const extras = [call.tools, call.toolChoice, call.responseFormat, ...call.messages.map((m) => m.toolCalls)];
  return extras.filter((e) => e !== undefined).map((e) => JSON.stringify(e));
}

/** Refuses an account that may not make calls (DESIGN step 6), by `standingReasonOf`. */
function checkAccount(account: AccountRecord | undefined): asserts account is AccountRecord {
  if (!account) throw sluiceError("invalid_api_key");
  const refused = standingReasonOf(account);
  if (refused !== undefined) throw sluiceError(refused);
}

/** What a validated call asks of its model and of the cap, whatever the account's standing. */
export interface CallSize {
  model: Model;
  promptTokens: number;
  /** The output tokens its worst case counts: max_tokens for each of its n choices. */
  outputTokens: number;
  /** The least hold that admits it: its prompt plus one output token (at least 1 micro). */
  minimum: number;
  /** Its worst case (prompt plus every output token): the hold it takes when the budget allows. */
  maximum: number;
}

/**
 * Applies DESIGN steps 7 and 8 (model, input size) and sizes the call's reservation. One function, so
 * that a chat call and Billing's EstimateChatCompletion can never price or limit a call differently.
 * @throws `model_not_found`, `input_too_large`.
 */
export function sizeCall(deps: Pick<PlanDeps, "models" | "tokenizer">, call: ChatCall): CallSize {
  const model = deps.models.get(call.model);
  if (!model)
    throw sluiceError("model_not_found", { message: `The model "${call.model.slice(0, 256)}" does not exist.` });
  const promptTokens = deps.tokenizer.countMessages(call.messages, MAX_INPUT_TOKENS, inputExtras(call));
  if (promptTokens === undefined) throw sluiceError("input_too_large");
  const outputTokens = call.maxTokens * call.n;
  // A free model still needs budget left: free calls are never a way around a cap.
  const minimum = Math.max(1, costUsdMicros(model, promptTokens, 1));
  const maximum = Math.max(minimum, costUsdMicros(model, promptTokens, outputTokens));
  return { model, promptTokens, outputTokens, minimum, maximum };
}

/**
 * Applies DESIGN steps 6 to 8 to a validated call (account status, model, input size) and
 * sizes its reservation: at least the prompt plus one output token, at most its worst case.
 */
export async function planCall(deps: PlanDeps, principal: Principal, call: ChatCall, now: number): Promise<CallPlan> {
  const found = await deps.store.getAccount(principal.accountId);
  checkAccount(found);
  const { model, promptTokens, outputTokens, minimum, maximum } = sizeCall(deps, call);

  const period = periodOf(now);
  const id = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
  return {
    account: found,
    apiKeyId: principal.apiKey.id,
    model,
    promptTokens,
    period,
    header: { id, model: model.name, created: Math.floor(now / 1000) },
    tokens: promptTokens + outputTokens,
    reservation: {
      accountId: found.id,
      period,
      reservationId: id,
      apiKeyId: principal.apiKey.id,
      minimum,
      maximum,
      ttlMs: deps.reservationTtlMs,
    },
    request: {
      model: model.name,
      messages: call.messages,
      maxTokens: call.maxTokens,
      stop: call.stop,
      ...(call.temperature !== undefined && { temperature: call.temperature }),
      ...(call.topP !== undefined && { topP: call.topP }),
      ...(call.seed !== undefined && { seed: call.seed }),
      ...(call.presencePenalty !== undefined && { presencePenalty: call.presencePenalty }),
      ...(call.frequencyPenalty !== undefined && { frequencyPenalty: call.frequencyPenalty }),
      ...(call.user !== undefined && { user: call.user }),
      ...(call.tools !== undefined && { tools: call.tools }),
      ...(call.toolChoice !== undefined && { toolChoice: call.toolChoice }),
      ...(call.responseFormat !== undefined && { responseFormat: call.responseFormat }),
      ...(call.logprobs !== undefined && { logprobs: call.logprobs }),
      ...(call.topLogprobs !== undefined && { topLogprobs: call.topLogprobs }),
      n: call.n,
    },
  };
}
