import { randomUUID } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineRequest } from "../../engines/engine.ts";
import type { Model, ModelRegistry } from "../../engines/models.ts";
import type { Tokenizer } from "../../engines/tokenizer.ts";
import { reasonOf, sluiceError } from "../../errors/catalogue.ts";
import type { Logger } from "../../logger.ts";
import type { AccountRecord, ReserveRequest, SettleRequest, Store } from "../../store/store.ts";
import type { Principal } from "../auth/index.ts";
import { costUsdMicros, msUntilNextPeriod, periodOf } from "./pricing.ts";
import type { ChatCall } from "./validate.ts";

/** The retry delay suggested when an engine is unavailable. */
const UNAVAILABLE_RETRY_MS = 1000;

/** Back-offs between settle attempts; settle is idempotent per completion id, so retrying is safe. */
const SETTLE_RETRIES_MS = [50, 250];

/**
 * Settles a call, retrying a store failure: a settle whose reply was lost may have happened,
 * and giving up at once would then report a failure for a call that was charged.
 */
async function settleWithRetry(store: Store, request: SettleRequest): Promise<void> {
  for (const delay of SETTLE_RETRIES_MS) {
    try {
      return await store.settle(request);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
  return store.settle(request);
}

/**
 * The reason given to an engine's signal when its call is over. One shared value: aborting
 * without a reason builds a DOMException with a stack trace on every call.
 */
const CALL_OVER = Object.freeze(new Error("the call is over"));

/** A token count an upstream may report: a whole, non-negative, safe number. */
const validCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

/** SPEC's input limit, in tokens. */
export const MAX_INPUT_TOKENS = 32_768;

export interface CallDeps {
  store: Store;
  models: ModelRegistry;
  tokenizer: Tokenizer;
  now: () => number;
  reservationTtlMs: number;
  logger: Logger;
}

/** What a call yields, in order: deltas, then the finish, then the billed usage. */
export type CallEvent =
  | { type: "delta"; choice: number; text: string; toolCalls?: JsonValue[] }
  | { type: "finish"; choice: number; finishReason: FinishReason; logprobs?: JsonObject }
  | { type: "usage"; promptTokens: number; completionTokens: number };

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
  /** The reservation to take with the admission. */
  reservation: ReserveRequest;
}

/** Input sent besides message text (tool definitions and calls, formats): it is input too. */
function inputExtras(call: ChatCall): string[] {
  const extras = [call.tools, call.toolChoice, call.responseFormat, ...call.messages.map((m) => m.toolCalls)];
  return extras.filter((e) => e !== undefined).map((e) => JSON.stringify(e));
}

/** Refuses an account that may not make calls (DESIGN step 6). */
function checkAccount(account: AccountRecord | undefined): asserts account is AccountRecord {
  if (!account) throw sluiceError("invalid_api_key");
  if (!account.onboardingComplete || account.spendCapUsdMicros === undefined) throw sluiceError("onboarding_incomplete");
  if (account.paymentStatus === "failed") throw sluiceError("payment_failed");
  if (account.subscriptionStatus === "canceled") throw sluiceError("subscription_canceled");
}

/**
 * Applies DESIGN steps 6 to 8 to a validated call (account status, model, input size) and
 * sizes its reservation: at least the prompt plus one output token, at most its worst case.
 */
export async function planCall(deps: CallDeps, principal: Principal, call: ChatCall, now: number): Promise<CallPlan> {
  const found = await deps.store.getAccount(principal.accountId);
  checkAccount(found);
  const model = deps.models.get(call.model);
  if (!model) throw sluiceError("model_not_found", { message: `The model "${call.model.slice(0, 256)}" does not exist.` });
  const promptTokens = deps.tokenizer.countMessages(call.messages, MAX_INPUT_TOKENS, inputExtras(call));
  if (promptTokens === undefined) throw sluiceError("input_too_large");

  const period = periodOf(now);
  const id = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
  const worst = costUsdMicros(model, promptTokens, call.maxTokens * call.n);
  // A free model still needs budget left: free calls are never a way around a cap.
  const minimum = Math.max(1, costUsdMicros(model, promptTokens, 1));
  return {
    account: found,
    apiKeyId: principal.apiKey.id,
    model,
    promptTokens,
    period,
    header: { id, model: model.name, created: Math.floor(now / 1000) },
    reservation: { accountId: found.id, period, reservationId: id, minimum, maximum: Math.max(minimum, worst), ttlMs: deps.reservationTtlMs, nowMs: now },
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

/**
 * Runs an admitted call that holds `granted` micros. The returned stream owns the hold: it
 * extends it as output grows, settles it with the usage record once the engine has finished,
 * and releases it on every other exit (client gone, engine failure, refused extension), so no
 * path leaks or double-charges.
 *
 * `stream` decides what a refused extension means: a stream is cut with its delivered
 * tokens charged; a unary call is refused whole and not charged.
 */
export function runCall(deps: CallDeps, plan: CallPlan, granted: number, stream: boolean, signal: AbortSignal): AsyncGenerator<CallEvent> {
  const { account, model, promptTokens, request, period } = plan;
  const id = plan.header.id;
  const worst = plan.reservation.maximum;
  const reservation = { accountId: account.id, period, reservationId: id, ttlMs: deps.reservationTtlMs };
  let reserved = granted;

  const events = async function* (): AsyncGenerator<CallEvent> {
    const engineAbort = new AbortController();
    const onAbort = () => engineAbort.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    // Keeps the hold alive while the engine runs; a crashed process stops renewing it.
    const renew = setInterval(() => {
      deps.store.reserve({ ...reservation, minimum: 0, maximum: 0, nowMs: deps.now() }).catch((err: unknown) => {
        deps.logger.warn("reservation renewal failed", { id, error: String(err) });
      });
    }, Math.max(250, Math.floor(deps.reservationTtlMs / 3)));
    let settled = false;
    let produced = 0;
    try {
      for await (const event of model.engine.generate(request, engineAbort.signal)) {
        if (event.type === "delta") {
          const needed = costUsdMicros(model, promptTokens, produced + event.tokens);
          if (needed > reserved) {
            const more = await deps.store.reserve({ ...reservation, minimum: needed - reserved, maximum: Math.max(needed, worst) - reserved, nowMs: deps.now() });
            if (more === 0) {
              // A stream that delivered chunks is cut and charged for them; one that delivered
              // none (or a unary call) is refused whole, and its hold released.
              if (stream && produced > 0) {
                await settleWithRetry(deps.store, { ...reservation, chargeUsdMicros: Math.min(reserved, costUsdMicros(model, promptTokens, produced)) });
                settled = true;
              }
              throw sluiceError("spend_cap_exceeded", { retryAfterMs: msUntilNextPeriod(deps.now()) });
            }
            reserved += more;
          }
          produced += event.tokens;
          if (event.text || event.toolCalls) yield { type: "delta", choice: event.choice ?? 0, text: event.text, ...(event.toolCalls && { toolCalls: event.toolCalls }) };
          continue;
        }
        // An upstream's own count is used when it is sane; otherwise ours.
        // (A count of no output after output was streamed is not sane either.)
        const sane = (u: { promptTokens: number; completionTokens: number }) =>
          validCount(u.promptTokens) && validCount(u.completionTokens) && !(u.completionTokens === 0 && produced > 0);
        const usage = event.usage && sane(event.usage) ? event.usage : undefined;
        const prompt = usage?.promptTokens ?? promptTokens;
        const completion = usage?.completionTokens ?? produced;
        const charge = Math.min(reserved, costUsdMicros(model, prompt, completion));
        await settleWithRetry(deps.store, {
          ...reservation,
          chargeUsdMicros: charge,
          record: {
            id, accountId: account.id, apiKeyId: plan.apiKeyId, model: model.name,
            promptTokens: prompt, completionTokens: completion, costUsdMicros: charge, createTimeMs: deps.now(),
          },
        });
        settled = true;
        const finishes = event.choices ?? [{ finishReason: event.finishReason, ...(event.logprobs && { logprobs: event.logprobs }) }];
        for (const [choice, f] of finishes.entries()) {
          yield { type: "finish", choice, finishReason: f.finishReason, ...(f.logprobs && { logprobs: f.logprobs }) };
        }
        yield { type: "usage", promptTokens: prompt, completionTokens: completion };
        return;
      }
      if (signal.aborted) throw sluiceError("internal_error", { message: "call canceled" });
      throw sluiceError("internal_error", { message: "the engine ended without finishing" });
    } catch (err) {
      if (reasonOf(err) !== undefined) throw err;
      if (err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded)) {
        throw sluiceError("service_unavailable", { retryAfterMs: UNAVAILABLE_RETRY_MS, cause: err });
      }
      if (!signal.aborted) deps.logger.error("engine failed", { id, error: err instanceof Error ? err.message : String(err) });
      throw sluiceError("internal_error", { cause: err });
    } finally {
      clearInterval(renew);
      signal.removeEventListener("abort", onAbort);
      engineAbort.abort(CALL_OVER);
      if (!settled) await deps.store.release(account.id, period, id).catch(() => undefined);
    }
  };

  return events();
}
