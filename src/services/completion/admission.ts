import { ConnectError } from "@connectrpc/connect";
import type { ChatParams } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { sluiceError } from "../../errors/catalogue.ts";
import { rateLimitHeaders, type Principal } from "../auth/index.ts";
import { msUntilNextPeriod } from "./pricing.ts";
import { planCall, runCall, type CallDeps, type CallEvent, type CallHeader, type CallPlan } from "./run-call.ts";
import { validateChatParams } from "./validate.ts";

/** The parts of a handler context that admission uses. */
interface AdmissionContext {
  signal: AbortSignal;
  responseHeader: Headers;
}

/**
 * Admits a chat call in one store round trip: the rate limit and the reservation are taken
 * together. The rules of DESIGN steps 5 to 8 (validation, account status, model, input size)
 * are checked first but their refusals are held back until the rate limit has been charged,
 * so a caller still sees the check order (429 before 400, and so on) and each step runs once.
 */
export async function admitCall(deps: CallDeps, principal: Principal, params: ChatParams | undefined, stream: boolean, ctx: AdmissionContext): Promise<{ header: CallHeader; events: AsyncGenerator<CallEvent> }> {
  const now = deps.now();
  let plan: CallPlan | undefined;
  let refusal: unknown;
  try {
    plan = await planCall(deps, principal, validateChatParams(params), now);
  } catch (err) {
    refusal = err;
  }
  let admission;
  try {
    admission = await deps.store.admit(principal.apiKey, now, plan?.reservation);
  } catch (err) {
    // A reply lost to a timeout does not mean the script did not run: drop the hold it may
    // have taken. The release follows the admission on the same connection, and is a no-op
    // when there is no hold.
    if (plan) await deps.store.release(plan.reservation.accountId, plan.period, plan.reservation.reservationId).catch(() => undefined);
    throw err;
  }
  const headers = rateLimitHeaders(admission);
  for (const [name, value] of Object.entries(headers)) ctx.responseHeader.set(name, value);
  if (!admission.allowed) throw sluiceError("api_key_rate_limited", { retryAfterMs: admission.retryAfterMs, headers });
  if (refusal !== undefined || !plan) {
    const err = ConnectError.from(refusal);
    for (const [name, value] of Object.entries(headers)) err.metadata.set(name, value);
    throw err;
  }
  if (admission.granted === 0) throw sluiceError("spend_cap_exceeded", { retryAfterMs: msUntilNextPeriod(now), headers });
  return { header: plan.header, events: runCall(deps, plan, admission.granted, stream, ctx.signal) };
}
