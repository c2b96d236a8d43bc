/**
 * "Estimate a call": the holder types a model, a user message and a max_tokens, and `EstimateChatCompletion`
 * says what that chat call would reserve and whether it would run now, by the core's own planning and checks.
 * Nothing is charged or held, so the form can be used freely (each estimate counts against the key's rate
 * limit, like any console call).
 */
import { useState } from "preact/hooks";
import type { EstimateChatCompletionResponse } from "../../../gen/sluice/billing/v1/billing_service_pb.ts";
import { billing } from "../api.ts";
import { formatUsd } from "../money.ts";
import { ErrorAlert, Loading } from "./feedback.tsx";
import { STANDING_MEANINGS } from "./standing.tsx";

/** The default model, as a chat call without `model` gets it. */
const DEFAULT_MODEL = "service-extract";

/** The refusals an estimate can answer with that are not the account's standing, in words. */
const REFUSALS: Record<string, (model: string) => string> = {
  model_not_found: (model) => `There is no model named “${model}” on this server (404 model_not_found).`,
  input_too_large: () => "The message is longer than the 32,768-token input limit (413 input_too_large).",
  spend_cap_exceeded: () =>
    "What is left of this month's cap does not cover the prompt plus one output token (402 spend_cap_exceeded).",
};

/** Why the call would be refused, in words, from the catalogue reason. */
function refusalWords(e: EstimateChatCompletionResponse): string {
  const reason = e.refusalReason;
  return STANDING_MEANINGS[reason] ?? REFUSALS[reason]?.(e.model) ?? `The call would be refused (${reason}).`;
}

/** A figure of the estimate, or a dash when the checks stopped before it was known. */
function figure(value: bigint | undefined, format: (v: bigint) => string): string {
  return value === undefined ? "—" : format(value);
}

/** The estimate's verdict and figures. */
function EstimateResult({ estimate: e }: { estimate: EstimateChatCompletionResponse }) {
  const tokens = (v: bigint) => v.toLocaleString("en-US");
  return (
    <div class="card" data-estimate={e.admitted ? "admitted" : e.refusalReason}>
      <p class={e.admitted ? "standing" : "standing blocked"}>
        {e.admitted ? (
          <>
            <strong>Would be admitted now.</strong> Calls in flight can change this before you call.
          </>
        ) : (
          <>
            <strong>Would be refused.</strong> {refusalWords(e)}
          </>
        )}
      </p>
      <dl class="stats">
        <div>
          <dt>Prompt tokens</dt>
          <dd data-stat="estimate-prompt">{figure(e.promptTokens, tokens)}</dd>
        </div>
        <div>
          <dt>Output tokens reserved for</dt>
          <dd data-stat="estimate-output">{figure(e.maxOutputTokens, tokens)}</dd>
        </div>
        <div>
          <dt>Worst-case cost</dt>
          <dd data-stat="estimate-cost">{figure(e.worstCaseCostUsdMicros, formatUsd)}</dd>
        </div>
        <div>
          <dt>Budget left</dt>
          <dd data-stat="estimate-left">
            {e.accountBudgetLeftUsdMicros === undefined ? "No cap" : formatUsd(e.accountBudgetLeftUsdMicros)}
          </dd>
        </div>
        {e.keyBudgetLeftUsdMicros !== undefined && (
          <div>
            <dt>Key budget left</dt>
            <dd data-stat="estimate-key-left">{formatUsd(e.keyBudgetLeftUsdMicros)}</dd>
          </div>
        )}
      </dl>
    </div>
  );
}

/** Where the last estimate stands. */
type EstimateState =
  | { status: "idle" }
  | { status: "loading" }
  | { status: "error"; error: unknown }
  | { status: "ok"; value: EstimateChatCompletionResponse };

/** The form and, below it, the last estimate in a polite live region. */
export function EstimateForm() {
  const [model, setModel] = useState(DEFAULT_MODEL);
  const [message, setMessage] = useState("");
  const [maxTokens, setMaxTokens] = useState("");
  const [state, setState] = useState<EstimateState>({ status: "idle" });
  const maxText = maxTokens.trim();
  const maxError = maxText !== "" && !/^\d{1,9}$/.test(maxText) ? "Enter a whole number of tokens, such as 256." : "";

  const submit = async (event: Event) => {
    event.preventDefault();
    if (maxError) return setState({ status: "error", error: `Max tokens: ${maxError}` });
    setState({ status: "loading" });
    try {
      const value = await billing.estimateChatCompletion({
        params: {
          model: model.trim(),
          messages: [{ role: "user", content: message }],
          ...(maxText !== "" && { maxTokens: BigInt(maxText) }),
        },
      });
      setState({ status: "ok", value });
    } catch (error) {
      setState({ status: "error", error });
    }
  };

  return (
    <>
      <form class="card form-grid" onSubmit={submit} aria-describedby="estimate-about">
        <p id="estimate-about" class="hint">
          What a chat call would reserve against your cap, and whether it would run now. Nothing is charged.
        </p>
        <label for="estimate-model">Model</label>
        <input
          id="estimate-model"
          type="text"
          autoComplete="off"
          spellcheck={false}
          value={model}
          onInput={(e) => setModel(e.currentTarget.value)}
        />
        <label for="estimate-message">Message (sent as one user message)</label>
        <textarea id="estimate-message" rows={4} value={message} onInput={(e) => setMessage(e.currentTarget.value)} />
        <label for="estimate-max-tokens">Max tokens (optional)</label>
        <input
          id="estimate-max-tokens"
          type="text"
          inputMode="numeric"
          autoComplete="off"
          aria-invalid={maxError ? "true" : undefined}
          aria-describedby="estimate-max-tokens-hint"
          value={maxTokens}
          onInput={(e) => setMaxTokens(e.currentTarget.value)}
        />
        <p id="estimate-max-tokens-hint" class="hint">
          {maxError || "Empty, 0 or above 4,096 means 4,096, as for a real call."}
        </p>
        <button type="submit" disabled={state.status === "loading"}>
          {state.status === "loading" ? "Estimating…" : "Estimate"}
        </button>
      </form>
      <div aria-live="polite">
        {state.status === "loading" && <Loading what="the estimate" />}
        {state.status === "error" && <ErrorAlert error={state.error} />}
        {state.status === "ok" && <EstimateResult estimate={state.value} />}
      </div>
    </>
  );
}
