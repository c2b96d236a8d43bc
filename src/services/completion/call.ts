import { ConnectError, type ContextValues } from "@connectrpc/connect";
import type { ChatParams } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineEvent } from "../../engines/engine.ts";
import { reasonOf, sluiceError } from "../../errors/catalogue.ts";
import { type Logger, withFields } from "../../logger.ts";
import type { Principal } from "../auth/index.ts";
import { rateLimitHeaders } from "../auth/rate-limit-headers.ts";
import type { CallTracker } from "./call-tracker.ts";
import { createHandoff, type Handoff } from "./handoff.ts";
import { planCall, type CallHeader, type CallPlan, type PlanDeps } from "./plan.ts";
import { costUsdMicros } from "./pricing.ts";
import { releaseResolved, type Resolved, settleResolved, type Hold, type ResolveOptions } from "./resolve-outcome.ts";
import { validateChatParams } from "./validate.ts";
import { CALL_OVER, CALLER_GONE, canceled, failureOf, unsettled } from "./call-failures.ts";
import { abortableSteps } from "./abortable-steps.ts";
import { type CallEvent, deliverEnd } from "./call-events.ts";
import { spendCapRefusal } from "./spend-cap.ts";
import { tokenLimitRefusal } from "./token-limit.ts";
import { type CallObserver, type ObserverDeps, observeCall } from "./call-observer.ts";
import { callFactsKey, requestIdKey } from "../request-context.ts";
import type { RateCharge } from "../../store/store.ts";

/** Everything a call needs from the core. */
export interface CallDeps extends PlanDeps, ObserverDeps {
  now: () => number;
  logger: Logger;
  calls: CallTracker;
  /** How long a reader may take nothing before its call is ended, unbilled. */
  writeTimeoutMs: number;
  /** How long a settle whose reply was lost is chased before its outcome is given up as unknown. */
  resolveDeadlineMs: number;
  /** The spend-alert thresholds each settle asks the store to raise (`SettleRequest.alertPercents`). */
  spendAlertPercents?: readonly number[];
}

/** An admitted call: its identity, and its events for the one reader. */
export interface OpenedCall {
  header: CallHeader;
  events: AsyncIterable<CallEvent>;
}

/** The parts of a handler context a call uses. */
export interface CallContext {
  signal: AbortSignal;
  responseHeader: Headers;
  /** The RPC's context values: its request id and facts (absent when a test calls directly). */
  values?: ContextValues;
}

/** Events buffered for a slow reader before the engine is paused. */
const HANDOFF_CAPACITY = 32;

/** A token count an upstream may report: a whole, non-negative, safe number. */
const validCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

/**
 * Opens a chat call. This module owns a call from before its admission to its last event, and
 * every way out ends in exactly one settle or one release (DESIGN, "Life of a call"):
 * - keyed: the rules run first; their refusals wait for the rate limit, which is charged in
 *   the same store step as the hold (one round trip), so callers still see the check order,
 *   and a process at its limit of calls in flight refuses last (503);
 * - admitted: a caller gone during the admission round trip gets its hold released;
 * - running: the engine runs on its own (see `runAdmitted`), not driven by the reader.
 */
export async function openCall(
  deps: CallDeps,
  principal: Principal,
  params: ChatParams | undefined,
  stream: boolean,
  ctx: CallContext,
): Promise<OpenedCall> {
  // A shutdown waits for admissions in flight too: one may end in a release.
  const opening = admitCall(deps, principal, params, stream, ctx);
  deps.calls.track(opening);
  return opening;
}

/** The admission of a call: its rules, then its rate-limit charge and its hold in one store step. */
async function admitCall(
  deps: CallDeps,
  principal: Principal,
  params: ChatParams | undefined,
  stream: boolean,
  ctx: CallContext,
): Promise<OpenedCall> {
  if (ctx.signal.aborted) throw canceled();
  const requestId = ctx.values?.get(requestIdKey) ?? "";
  // The call's domain lines carry its request id, like its access line.
  deps = { ...deps, logger: withFields(deps.logger, { requestId }) };
  const observer = observeCall(deps, ctx.values?.get(callFactsKey), requestId);
  const now = deps.now();
  let plan: CallPlan | undefined;
  let refusal: unknown;
  try {
    plan = await planCall(deps, principal, validateChatParams(params), now);
  } catch (err) {
    refusal = err;
  }
  if (plan) observer.planned(plan.model.name, plan.header.id);
  if (ctx.signal.aborted) throw canceled();
  let decision: RateCharge;
  try {
    // A call refused before it was sized (tokens 0) reads its key's token budget for the headers.
    const charge = { key: principal.apiKey, nowMs: now, reserve: plan?.reservation, tokens: plan?.tokens ?? 0 };
    decision = await deps.store.chargeRateLimit(charge);
  } catch (err) {
    // A reply lost to a timeout does not mean the script did not run: close the id in the
    // background. The caller is told 503 now, which is true: nothing here can settle.
    if (plan) releaseLater(deps, plan.reservation);
    throw err;
  }
  if (plan && decision.granted > 0 && ctx.signal.aborted) {
    releaseLater(deps, plan.reservation);
    throw canceled();
  }
  const headers = rateLimitHeaders(decision);
  for (const [name, value] of Object.entries(headers)) ctx.responseHeader.set(name, value);
  if (!decision.allowed) throw sluiceError("api_key_rate_limited", { retryAfterMs: decision.retryAfterMs, headers });
  if (refusal !== undefined || !plan) throw withHeaders(refusal, headers);
  // The token budget comes after the rules that size the call, and before the spend cap.
  if (decision.tokens?.allowed === false) throw tokenLimitRefusal(decision.tokens, headers);
  observer.reservation(decision.granted === 0 ? "refused" : "admitted");
  if (decision.granted === 0) throw spendCapRefusal(decision, now, deps.reservationTtlMs, headers);
  // A process at its limit of calls in flight refuses last, as DESIGN orders (503 is step
  // 10): the hold just taken is released.
  let leave: () => void;
  try {
    leave = deps.calls.enter();
  } catch (err) {
    releaseLater(deps, plan.reservation);
    throw withHeaders(err, headers);
  }
  const events = runAdmitted(deps, plan, decision.granted, stream, ctx.signal, leave, observer);
  return { header: plan.header, events };
}

/** A refusal after the rate-limit charge, as a `ConnectError` carrying that charge's headers. */
function withHeaders(err: unknown, headers: Record<string, string>): ConnectError {
  const refusal = ConnectError.from(err);
  for (const [name, value] of Object.entries(headers)) refusal.metadata.set(name, value);
  return refusal;
}

function resolveOptions(deps: CallDeps): ResolveOptions {
  return { deadlineMs: deps.resolveDeadlineMs, stop: deps.calls.stopping, logger: deps.logger };
}

/** Counts a known outcome of a hold (settled or released) in the reservation metrics. */
function counted(deps: CallDeps, outcome: Resolved): Resolved {
  if (outcome !== "unknown") deps.metrics?.reservation(outcome);
  return outcome;
}

/** Releases a hold in the background, chasing the store until it answers; shutdown waits for it. */
function releaseLater(deps: CallDeps, hold: Hold): void {
  const release = releaseResolved(deps.store, { ...hold, nowMs: deps.now() }, resolveOptions(deps));
  deps.calls.track(release.then((o) => counted(deps, o)));
}

/**
 * Runs an admitted call that holds `granted` micros. The engine loop runs on its own and hands
 * events to the reader through a bounded hand-off, so the call ends (and settles or releases)
 * whatever the reader does: a caller that leaves aborts it through `signal` or by stopping its
 * iteration, and a reader stuck past the write timeout ends it, unbilled.
 */
function runAdmitted(
  deps: CallDeps,
  plan: CallPlan,
  granted: number,
  stream: boolean,
  signal: AbortSignal,
  leave: () => void,
  observer: CallObserver,
): AsyncIterable<CallEvent> {
  const engineAbort = new AbortController();
  const stop = (reason: unknown) => {
    if (engineAbort.signal.aborted) return;
    engineAbort.abort(reason);
    handoff.cut(reason);
  };
  /** Output tokens of the deltas the reader has taken: what a spend-cap cut may charge. */
  const delivered = { tokens: 0 };
  const handoff = createHandoff<CallEvent>({
    capacity: HANDOFF_CAPACITY,
    writeTimeoutMs: deps.writeTimeoutMs,
    onReaderGone: () => stop(CALLER_GONE),
    onTake: (e) => {
      if (e.type === "delta") delivered.tokens += e.tokens;
    },
  });
  const onAbort = () => stop(CALLER_GONE);
  signal.addEventListener("abort", onAbort, { once: true });
  if (signal.aborted) onAbort();
  const run = pump(deps, plan, granted, stream, handoff, engineAbort, delivered, observer).finally(() => {
    signal.removeEventListener("abort", onAbort);
    leave();
  });
  deps.calls.track(run);
  return handoff.reader;
}

/** The engine loop of one call; see `runAdmitted`. Ends in exactly one settle or one release. */
async function pump(
  deps: CallDeps,
  plan: CallPlan,
  granted: number,
  stream: boolean,
  handoff: Handoff<CallEvent>,
  engineAbort: AbortController,
  delivered: { readonly tokens: number },
  observer: CallObserver,
): Promise<void> {
  const { account, model, promptTokens, period } = plan;
  const id = plan.header.id;
  const worst = plan.reservation.maximum;
  const hold = { accountId: account.id, period, reservationId: id, apiKeyId: plan.apiKeyId };
  const ttl = { ttlMs: deps.reservationTtlMs };
  const alerts = { alertPercents: deps.spendAlertPercents ?? [] };
  const options = resolveOptions(deps);
  let reserved = granted;
  let produced = 0;
  let renew: NodeJS.Timeout | undefined;
  let events: AsyncIterator<EngineEvent> | undefined;
  const steps = abortableSteps(engineAbort.signal);
  const request = observer.engineStarting(plan.request);
  /** The catalogue reason the call failed with, for its engine span. */
  let errorType: string | undefined;
  try {
    // Keeps the hold alive while the engine runs; a crashed process stops renewing it.
    renew = setInterval(
      () => {
        deps.store
          .extendReservation({ ...hold, ...ttl, minimum: 0, maximum: 0, nowMs: deps.now() })
          .catch((err: unknown) => {
            deps.logger.warn("reservation renewal failed", { id, error: String(err) });
          });
      },
      Math.max(250, Math.floor(deps.reservationTtlMs / 3)),
    );
    renew.unref();
    // Inside the try: an engine whose generate() throws at once is an engine failure too.
    events = model.engine.generate(request, engineAbort.signal)[Symbol.asyncIterator]();
    for (;;) {
      const step: IteratorResult<EngineEvent> = await steps.step(events.next());
      if (step.done)
        throw engineAbort.signal.aborted ? engineAbort.signal.reason : new Error("the engine ended without finishing");
      const event = step.value;
      if (event.type === "delta") {
        const needed = costUsdMicros(model, promptTokens, produced + event.tokens);
        if (needed > reserved) {
          const more = await deps.store.extendReservation({
            ...hold,
            ...ttl,
            minimum: needed - reserved,
            maximum: Math.max(needed, worst) - reserved,
            nowMs: deps.now(),
          });
          if (engineAbort.signal.aborted) throw engineAbort.signal.reason;
          observer.reservation(more.granted === 0 ? "cut" : "extended");
          if (more.granted === 0) {
            // Temporary when only other calls' holds are in the way, as at admission.
            const capped = spendCapRefusal(more, deps.now(), deps.reservationTtlMs);
            if (!stream) throw capped; // a unary call is refused whole (released below)
            // A stream is cut. Its reader first gets what was already handed over (the hold
            // covered it), unless it leaves or is stuck; then nothing more reaches it, and
            // exactly the chunks it took are charged. One that took none is refused whole.
            await handoff.whenEmpty().catch(() => undefined);
            handoff.cut(capped);
            if (delivered.tokens === 0) throw capped;
            const charge = Math.min(reserved, costUsdMicros(model, promptTokens, delivered.tokens));
            const outcome = counted(
              deps,
              await settleResolved(
                deps.store,
                {
                  ...hold,
                  ...alerts,
                  chargeUsdMicros: charge,
                  nowMs: deps.now(),
                  usedTokens: promptTokens + delivered.tokens,
                },
                options,
                deps.calls.track,
              ),
            );
            if (outcome === "settled") observer.billed(promptTokens, delivered.tokens, charge);
            errorType = "spend_cap_exceeded";
            handoff.fail(outcome === "settled" ? capped : unsettled(outcome, id));
            return;
          }
          reserved += more.granted;
        }
        produced += event.tokens;
        observer.token();
        if (event.text || event.toolCalls) {
          await handoff.push({
            type: "delta",
            choice: event.choice ?? 0,
            text: event.text,
            tokens: event.tokens,
            ...(event.toolCalls && { toolCalls: event.toolCalls }),
            ...(event.last !== undefined && { last: event.last }),
          });
        }
        continue;
      }
      // The engine produced its whole answer: the call is complete, and is charged even if its
      // caller leaves from here on (DESIGN, "When a call is complete").
      // An upstream's own count is used when it is sane; otherwise ours. (A count of no output
      // after output was streamed is not sane either.)
      const sane = (u: { promptTokens: number; completionTokens: number }) =>
        validCount(u.promptTokens) && validCount(u.completionTokens) && !(u.completionTokens === 0 && produced > 0);
      const usage = event.usage && sane(event.usage) ? event.usage : undefined;
      const prompt = usage?.promptTokens ?? promptTokens;
      const completion = usage?.completionTokens ?? produced;
      const charge = Math.min(reserved, costUsdMicros(model, prompt, completion));
      const settled = settleResolved(
        deps.store,
        {
          ...hold,
          ...alerts,
          chargeUsdMicros: charge,
          nowMs: deps.now(),
          usedTokens: prompt + completion,
          record: {
            id,
            accountId: account.id,
            apiKeyId: plan.apiKeyId,
            model: model.name,
            promptTokens: prompt,
            completionTokens: completion,
            costUsdMicros: charge,
            createTimeMs: deps.now(),
          },
        },
        options,
        deps.calls.track,
      );
      const outcome = counted(deps, await settled);
      if (outcome !== "settled") {
        errorType = outcome === "released" ? "service_unavailable" : "internal_error";
        handoff.fail(unsettled(outcome, id));
        return;
      }
      observer.billed(prompt, completion, charge);
      observer.finished(event.choices?.map((c) => c.finishReason) ?? [event.finishReason]);
      await deliverEnd(handoff, event, {
        type: "usage",
        promptTokens: prompt,
        completionTokens: completion,
        costUsdMicros: charge,
      });
      return;
    }
  } catch (err) {
    // Every way out before the answer was whole: the caller is told now (nothing was settled,
    // so nothing can be billed), and the hold is released, chased until the store answers.
    const failure = failureOf(err, deps.logger, id);
    errorType = reasonOf(failure);
    handoff.fail(failure);
    if (!engineAbort.signal.aborted) engineAbort.abort(CALL_OVER);
    counted(deps, await releaseResolved(deps.store, { ...hold, nowMs: deps.now() }, options));
  } finally {
    observer.engineEnded(errorType);
    clearInterval(renew);
    steps.dispose();
    if (!engineAbort.signal.aborted) engineAbort.abort(CALL_OVER);
    // An engine stuck in `next()` finishes its `return()` whenever it wakes; nobody waits for it.
    events?.return?.().catch(() => undefined);
  }
}
