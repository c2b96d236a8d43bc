import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ChatParams, FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineEvent } from "../../engines/engine.ts";
import { billingUnknownError, reasonOf, sluiceError } from "../../errors/catalogue.ts";
import type { Logger } from "../../logger.ts";
import { rateLimitHeaders, type Principal } from "../auth/index.ts";
import type { CallTracker } from "./call-tracker.ts";
import { createHandoff, ReaderStuckError, type Handoff } from "./handoff.ts";
import { planCall, type CallHeader, type CallPlan, type PlanDeps } from "./plan.ts";
import { costUsdMicros, msUntilNextPeriod } from "./pricing.ts";
import { releaseResolved, settleResolved, type Hold, type ResolveOptions } from "./resolve-outcome.ts";
import { validateChatParams } from "./validate.ts";
import type { Admission } from "../../store/store.ts";

/** Everything a call needs from the core. */
export interface CallDeps extends PlanDeps {
  now: () => number;
  logger: Logger;
  calls: CallTracker;
  /** How long a reader may take nothing before its call is ended, unbilled. */
  writeTimeoutMs: number;
  /** How long a settle whose reply was lost is chased before its outcome is given up as unknown. */
  resolveDeadlineMs: number;
}

/** What a call yields, in order: deltas, then the finish, then the billed usage. */
export type CallEvent =
  | { type: "delta"; choice: number; text: string; toolCalls?: JsonValue[]; last?: boolean; tokens: number }
  | { type: "finish"; choice: number; finishReason: FinishReason; logprobs?: JsonObject }
  | { type: "usage"; promptTokens: number; completionTokens: number };

/** An admitted call: its identity, and its events for the one reader. */
export interface OpenedCall {
  header: CallHeader;
  events: AsyncIterable<CallEvent>;
}

/** The parts of a handler context a call uses. */
export interface CallContext {
  signal: AbortSignal;
  responseHeader: Headers;
}

/** The retry delay suggested when an engine is unavailable. */
const UNAVAILABLE_RETRY_MS = 1000;
/** Events buffered for a slow reader before the engine is paused. */
const HANDOFF_CAPACITY = 32;

/** Why a call was stopped early; shared values, so that stopping a call builds no exception. */
const CALLER_GONE = Object.freeze(new Error("the caller went away"));
const CALL_OVER = Object.freeze(new Error("the call is over"));

/** A token count an upstream may report: a whole, non-negative, safe number. */
const validCount = (n: number) => Number.isSafeInteger(n) && n >= 0;

const canceled = (message?: string) => sluiceError("canceled", message === undefined ? {} : { message });

/**
 * Races each `next()` of an engine against `signal`, with one abort listener for the whole
 * call rather than one added and removed per event (the event-target bookkeeping showed in
 * profiles of streams of many deltas).
 */
function abortableSteps(signal: AbortSignal): { step<T>(promise: Promise<T>): Promise<T>; dispose(): void } {
  let rejectStep: ((reason: unknown) => void) | undefined;
  const onAbort = () => rejectStep?.(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  return {
    step<T>(promise: Promise<T>): Promise<T> {
      if (signal.aborted) return Promise.reject(signal.reason);
      return new Promise<T>((resolve, reject) => {
        rejectStep = reject;
        promise.then(resolve, reject);
      });
    },
    dispose: () => signal.removeEventListener("abort", onAbort),
  };
}

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
  const opening = admit(deps, principal, params, stream, ctx);
  deps.calls.track(opening);
  return opening;
}

async function admit(
  deps: CallDeps,
  principal: Principal,
  params: ChatParams | undefined,
  stream: boolean,
  ctx: CallContext,
): Promise<OpenedCall> {
  if (ctx.signal.aborted) throw canceled();
  const now = deps.now();
  let plan: CallPlan | undefined;
  let refusal: unknown;
  try {
    plan = await planCall(deps, principal, validateChatParams(params), now);
  } catch (err) {
    refusal = err;
  }
  if (ctx.signal.aborted) throw canceled();
  let admission: Admission;
  try {
    admission = await deps.store.admit(principal.apiKey, now, plan?.reservation);
  } catch (err) {
    // A reply lost to a timeout does not mean the script did not run: close the id in the
    // background. The caller is told 503 now, which is true: nothing here can settle.
    if (plan) releaseLater(deps, plan.reservation);
    throw err;
  }
  if (plan && admission.granted > 0 && ctx.signal.aborted) {
    releaseLater(deps, plan.reservation);
    throw canceled();
  }
  const headers = rateLimitHeaders(admission);
  for (const [name, value] of Object.entries(headers)) ctx.responseHeader.set(name, value);
  if (!admission.allowed) throw sluiceError("api_key_rate_limited", { retryAfterMs: admission.retryAfterMs, headers });
  if (refusal !== undefined || !plan) {
    const err = ConnectError.from(refusal);
    for (const [name, value] of Object.entries(headers)) err.metadata.set(name, value);
    throw err;
  }
  if (admission.granted === 0)
    throw sluiceError("spend_cap_exceeded", { retryAfterMs: msUntilNextPeriod(now), headers });
  // A process at its limit of calls in flight refuses last, as DESIGN orders (503 is step
  // 10): the hold just taken is released.
  let leave: () => void;
  try {
    leave = deps.calls.enter();
  } catch (err) {
    releaseLater(deps, plan.reservation);
    for (const [name, value] of Object.entries(headers)) ConnectError.from(err).metadata.set(name, value);
    throw err;
  }
  return { header: plan.header, events: runAdmitted(deps, plan, admission.granted, stream, ctx.signal, leave) };
}

function resolveOptions(deps: CallDeps): ResolveOptions {
  return { deadlineMs: deps.resolveDeadlineMs, stop: deps.calls.stopping, logger: deps.logger };
}

/** Releases a hold in the background, chasing the store until it answers; shutdown waits for it. */
function releaseLater(deps: CallDeps, hold: Hold): void {
  deps.calls.track(releaseResolved(deps.store, hold, resolveOptions(deps)));
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
  const run = pump(deps, plan, granted, stream, handoff, engineAbort, delivered).finally(() => {
    signal.removeEventListener("abort", onAbort);
    leave();
  });
  deps.calls.track(run);
  return handoff.reader;
}

/** What a reader is told of a settle that did not land: not billed (released), or unknown. */
const unsettled = (outcome: "released" | "unknown", id: string): ConnectError =>
  outcome === "released"
    ? sluiceError("service_unavailable", { retryAfterMs: UNAVAILABLE_RETRY_MS })
    : billingUnknownError(id);

/** The error a reader gets for a call that ended before its answer was whole (and was released). */
function failureOf(err: unknown, deps: CallDeps, id: string): ConnectError {
  if (err === CALLER_GONE) return canceled();
  if (err instanceof ReaderStuckError)
    return canceled("The reader took no data within the write timeout; the call was not billed.");
  if (reasonOf(err) !== undefined) return err as ConnectError;
  if (err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded)) {
    return sluiceError("service_unavailable", { retryAfterMs: UNAVAILABLE_RETRY_MS, cause: err });
  }
  deps.logger.error("engine failed", { id, error: err instanceof Error ? err.message : String(err) });
  return sluiceError("internal_error", { cause: err });
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
): Promise<void> {
  const { account, model, promptTokens, request, period } = plan;
  const id = plan.header.id;
  const worst = plan.reservation.maximum;
  const hold = { accountId: account.id, period, reservationId: id };
  const ttl = { ttlMs: deps.reservationTtlMs };
  const options = resolveOptions(deps);
  let reserved = granted;
  let produced = 0;
  let renew: NodeJS.Timeout | undefined;
  let events: AsyncIterator<EngineEvent> | undefined;
  const steps = abortableSteps(engineAbort.signal);
  try {
    // Keeps the hold alive while the engine runs; a crashed process stops renewing it.
    renew = setInterval(
      () => {
        deps.store.reserve({ ...hold, ...ttl, minimum: 0, maximum: 0, nowMs: deps.now() }).catch((err: unknown) => {
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
          const more = await deps.store.reserve({
            ...hold,
            ...ttl,
            minimum: needed - reserved,
            maximum: Math.max(needed, worst) - reserved,
            nowMs: deps.now(),
          });
          if (engineAbort.signal.aborted) throw engineAbort.signal.reason;
          if (more === 0) {
            const capped = sluiceError("spend_cap_exceeded", { retryAfterMs: msUntilNextPeriod(deps.now()) });
            if (!stream) throw capped; // a unary call is refused whole (released below)
            // A stream is cut. Its reader first gets what was already handed over (the hold
            // covered it), unless it leaves or is stuck; then nothing more reaches it, and
            // exactly the chunks it took are charged. One that took none is refused whole.
            await handoff.whenEmpty().catch(() => undefined);
            handoff.cut(capped);
            if (delivered.tokens === 0) throw capped;
            const charge = Math.min(reserved, costUsdMicros(model, promptTokens, delivered.tokens));
            const outcome = await settleResolved(
              deps.store,
              { ...hold, chargeUsdMicros: charge },
              options,
              deps.calls.track,
            );
            handoff.fail(outcome === "settled" ? capped : unsettled(outcome, id));
            return;
          }
          reserved += more;
        }
        produced += event.tokens;
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
      const outcome = await settleResolved(
        deps.store,
        {
          ...hold,
          chargeUsdMicros: charge,
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
      if (outcome !== "settled") {
        handoff.fail(unsettled(outcome, id));
        return;
      }
      await deliverEnd(handoff, event, prompt, completion);
      return;
    }
  } catch (err) {
    // Every way out before the answer was whole: the caller is told now (nothing was settled,
    // so nothing can be billed), and the hold is released, chased until the store answers.
    handoff.fail(failureOf(err, deps, id));
    if (!engineAbort.signal.aborted) engineAbort.abort(CALL_OVER);
    await releaseResolved(deps.store, hold, options);
  } finally {
    clearInterval(renew);
    steps.dispose();
    if (!engineAbort.signal.aborted) engineAbort.abort(CALL_OVER);
    // An engine stuck in `next()` finishes its `return()` whenever it wakes; nobody waits for it.
    events?.return?.().catch(() => undefined);
  }
}

/** Hands the finishes and the billed usage of a settled call to its reader, then ends it. */
async function deliverEnd(
  handoff: Handoff<CallEvent>,
  done: Extract<EngineEvent, { type: "done" }>,
  prompt: number,
  completion: number,
): Promise<void> {
  try {
    const finishes = done.choices ?? [
      { finishReason: done.finishReason, ...(done.logprobs && { logprobs: done.logprobs }) },
    ];
    for (const [choice, f] of finishes.entries()) {
      await handoff.push({
        type: "finish",
        choice,
        finishReason: f.finishReason,
        ...(f.logprobs && { logprobs: f.logprobs }),
      });
    }
    await handoff.push({ type: "usage", promptTokens: prompt, completionTokens: completion });
    handoff.close();
  } catch {
    // The reader left after the call was complete and charged: nothing is left to tell it.
    handoff.fail(canceled("The caller went away after the call was complete; it was billed."));
  }
}
