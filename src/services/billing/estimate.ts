import type { MessageInitShape } from "@bufbuild/protobuf";
import type { EstimateChatCompletionResponseSchema } from "../../../gen/sluice/billing/v1/billing_service_pb.ts";
import type { ChatParams } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { ModelRegistry } from "../../engines/models.ts";
import type { Tokenizer } from "../../engines/tokenizer.ts";
import { type Reason, reasonOf, sluiceError } from "../../errors/catalogue.ts";
import type { ApiKeyRecord, Balance, Store } from "../../store/store.ts";
import { standingReasonOf } from "../account-standing.ts";
import { keyBalancesNow } from "../api-keys.ts";
import type { Principal } from "../auth/index.ts";
import { type CallSize, sizeCall } from "../completion/plan.ts";
import { periodOf } from "../completion/pricing.ts";
import { type ChatCall, validateChatParams } from "../completion/validate.ts";

/** What an estimate reads: the store (account and balance), the models and the tokenizer, and the clock. */
export interface EstimateDeps {
  store: Store;
  models: ModelRegistry;
  tokenizer: Tokenizer;
  now: () => number;
}

/** The answer of `EstimateChatCompletion`. */
export type Estimate = MessageInitShape<typeof EstimateChatCompletionResponseSchema>;

/** The refusals of `sizeCall` an estimate reports as its answer; anything else it throws. */
const SIZE_REFUSALS: ReadonlySet<Reason> = new Set(["model_not_found", "input_too_large"]);

/** The call's size, or the reason sizing refuses it (an unknown model, an input over the limit). */
function sizeOrRefusal(deps: EstimateDeps, call: ChatCall): CallSize | Reason {
  try {
    return sizeCall(deps, call);
  } catch (err) {
    const reason = reasonOf(err);
    if (reason !== undefined && SIZE_REFUSALS.has(reason)) return reason;
    throw err;
  }
}

/**
 * The key's own budget left this period (its cap less its spend and live holds, floored at 0), or
 * undefined when it has no cap of its own: `estimateChatCompletion` refuses a call the smaller of the
 * account's and the key's budgets does not cover, the rule the store applies when it takes a hold.
 */
async function keyBudgetLeft(store: Store, key: ApiKeyRecord, nowMs: number) {
  if (key.spendCapUsdMicros === undefined) return undefined;
  return budgetLeft(key.spendCapUsdMicros, (await keyBalancesNow(store, key.accountId, nowMs)).get(key.id));
}

/** A cap less what its period spent and holds, floored at 0: the budget a new call may reserve from. */
function budgetLeft(cap: number, used: Balance | undefined): number {
  return Math.max(0, cap - (used?.spentUsdMicros ?? 0) - (used?.reservedUsdMicros ?? 0));
}

/**
 * Answers "what would this chat call reserve, and would it run now?" without running it: the same
 * validation (its failure is thrown, as a call's is), the same sizing (`sizeCall`, so the worst case is the
 * reservation a call takes) and the same checks in the same order (standing, model, input size, spend cap),
 * each refusal answered with its catalogue reason instead of thrown. Nothing is charged, recorded or held.
 * The spend-cap check is the one the store makes when it takes a hold (`Store.extendReservation`): the
 * budget left must cover `minimum`, the prompt plus one output token. It reads the balance the call's own
 * admission step would meet, so calls in flight can change the answer before a real call is made.
 * @throws `invalid_request_body` (the parameters), `invalid_api_key` (no account behind the key),
 * `service_unavailable` (Redis).
 */
export async function estimateChatCompletion(
  deps: EstimateDeps,
  principal: Principal,
  params: ChatParams | undefined,
): Promise<Estimate> {
  const call = validateChatParams(params);
  const nowMs = deps.now();
  const { accountId } = principal;
  const period = periodOf(nowMs);
  const [account, balance, keyLeft] = await Promise.all([
    deps.store.getAccount(accountId),
    deps.store.balance({ accountId, period, nowMs }),
    keyBudgetLeft(deps.store, principal.apiKey, nowMs),
  ]);
  // As a call's plan: a key whose account is gone is no key.
  if (!account) throw sluiceError("invalid_api_key");
  const size = sizeOrRefusal(deps, call);
  const cap = account.spendCapUsdMicros;
  const accountLeft = cap === undefined ? undefined : budgetLeft(cap, balance);
  const left = Math.min(accountLeft ?? Number.POSITIVE_INFINITY, keyLeft ?? Number.POSITIVE_INFINITY);
  const refusal =
    standingReasonOf(account) ??
    (typeof size === "string" ? size : undefined) ??
    (typeof size === "object" && left < size.minimum ? "spend_cap_exceeded" : undefined);
  return {
    model: call.model,
    ...(typeof size === "object" && {
      promptTokens: BigInt(size.promptTokens),
      maxOutputTokens: BigInt(size.outputTokens),
      worstCaseCostUsdMicros: BigInt(size.maximum),
    }),
    ...(accountLeft !== undefined && { accountBudgetLeftUsdMicros: BigInt(accountLeft) }),
    ...(keyLeft !== undefined && { keyBudgetLeftUsdMicros: BigInt(keyLeft) }),
    admitted: refusal === undefined,
    refusalReason: refusal ?? "",
  };
}
