import type { ConnectError } from "@connectrpc/connect";
import { sluiceError } from "../../errors/catalogue.ts";
import type { RateDecision } from "../../store/store.ts";

/**
 * The `ErrorInfo.metadata` key of `api_key_rate_limited` that names the limit that refused: set
 * to `tokens` for a key's tokens-per-minute budget, so a gRPC or Connect caller can tell it from
 * the request rate (which leaves it unset) without reading the message.
 */
export const LIMIT = "limit";

/** The message of a token-limit refusal; the catalogue's speaks of the request rate. */
const TOKENS_MESSAGE =
  "The API key's tokens-per-minute limit cannot cover this call's prompt and max_tokens yet. Retry after the " +
  "delay given, or ask for fewer tokens.";

/**
 * The 429 `api_key_rate_limited` of a call its key's token budget refused at admission (nothing was
 * held): the delay until the budget covers the call's tokens, as `Retry-After`, `retry-after-ms`
 * and `RetryInfo`, with the call's `x-ratelimit-*` headers (the token ones included).
 */
export function tokenLimitRefusal(budget: RateDecision, headers: Record<string, string>): ConnectError {
  return sluiceError("api_key_rate_limited", {
    message: TOKENS_MESSAGE,
    retryAfterMs: budget.retryAfterMs,
    metadata: { [LIMIT]: "tokens" },
    headers,
  });
}
