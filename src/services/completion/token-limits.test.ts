import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { contractBackends } from "../../store/contract/support.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { hi, keyLimitsCore } from "../../testing/key-limits-core.ts";

/**
 * Tokens-per-minute limits through the chat RPCs, on both stores: a call takes its prompt plus its
 * max_tokens from its key's budget at admission and gives back what it did not use when it ends
 * (all of it when it is not billed); a call the budget cannot cover yet gets 429
 * `api_key_rate_limited` (`ErrorInfo.metadata.limit` "tokens") with the exact wait; and every
 * keyed chat response of such a key carries the `x-ratelimit-*-tokens` headers.
 */
const tokenHeaders = (h: Headers) =>
  Object.fromEntries([...h].filter(([name]) => /^x-ratelimit-.*-tokens$/.test(name)));

describe.each(contractBackends().slice(0, 2))("token limits on %s", (_name, makeStore) => {
  it("takes prompt plus max_tokens, gives back the unused part, and says so in the headers", async () => {
    const t = await keyLimitsCore(makeStore);
    // 1,000 tokens a minute: 60 ms a token.
    const k = await t.key({ tokensPerMinute: 1_000 });
    const seen: Array<Record<string, string>> = [];
    const call = { ...k.call, onHeader: (h: Headers) => void seen.push(tokenHeaders(h)) };
    // Takes 7 + 20, uses 7 + 10: 10 come back at its end.
    await t.completion.createChatCompletion({ params: { ...hi, maxTokens: 20n } }, call);
    await t.completion.createChatCompletion({ params: { ...hi, maxTokens: 1n } }, call);
    expect(seen).toEqual([
      {
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "973",
        "x-ratelimit-reset-tokens": "1.62s",
      },
      { "x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "975", "x-ratelimit-reset-tokens": "1.5s" },
    ]);
  });

  it("refuses a call the budget cannot cover yet: 429, the exact wait and the headers, no hold", async () => {
    const t = await keyLimitsCore(makeStore);
    // 100 tokens a minute: 600 ms a token. The first call takes and uses 7 + 50.
    const k = await t.key({ tokensPerMinute: 100 });
    const long = { params: { ...hi, model: "long", maxTokens: 50n } };
    expect((await t.completion.createChatCompletion(long, k.call)).usage?.completionTokens).toBe(50n);
    const err = await expectFailure(
      () => t.completion.createChatCompletion(long, k.call),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    expect(err.findDetails(ErrorInfoSchema)[0]?.metadata).toEqual({ limit: "tokens" });
    // 43 left of the 57 asked for: 14 tokens, 8.4 s.
    expect(retryAfterMsOf(err)).toBe(8_400);
    expect(tokenHeaders(err.metadata)).toEqual({
      "x-ratelimit-limit-tokens": "100",
      "x-ratelimit-remaining-tokens": "43",
      "x-ratelimit-reset-tokens": "34.2s",
    });
    expect(err.metadata.get("x-ratelimit-limit-requests")).toBe("1000");
    expect(await t.balance()).toEqual({ spent: 107, reserved: 0 });
    t.clock.now += 8_400;
    expect((await t.completion.createChatCompletion(long, k.call)).usage?.completionTokens).toBe(50n);
  });

  it("gives back all of a call's tokens when it is not billed", async () => {
    const t = await keyLimitsCore(makeStore);
    const k = await t.key({ tokensPerMinute: 100 });
    const leaving = new AbortController();
    const holding = t.completion.createChatCompletion(
      { params: { ...hi, model: "holder", maxTokens: 40n } },
      { ...k.call, signal: leaving.signal },
    );
    holding.catch(() => undefined);
    await t.holder.started;
    leaving.abort();
    expect(await t.core.calls.drain(5_000)).toBe(true);
    expect(await t.balance()).toEqual({ spent: 0, reserved: 0 });
    const seen: Array<Record<string, string>> = [];
    await t.completion.createChatCompletion(
      { params: { ...hi, maxTokens: 1n } },
      { ...k.call, onHeader: (h) => void seen.push(tokenHeaders(h)) },
    );
    // Only this call's 7 + 1 are counted: the cancelled call's 47 came back.
    expect(seen[0]?.["x-ratelimit-remaining-tokens"]).toBe("92");
  });

  it("reads the budget for the headers of a call refused before sizing, only for keys with a limit", async () => {
    const t = await keyLimitsCore(makeStore);
    const limited = await t.key({ tokensPerMinute: 100 });
    const unknown = await expectFailure(
      () => t.completion.createChatCompletion({ params: { ...hi, model: "nope" } }, limited.call),
      Code.NotFound,
      "model_not_found",
    );
    expect(tokenHeaders(unknown.metadata)).toEqual({
      "x-ratelimit-limit-tokens": "100",
      "x-ratelimit-remaining-tokens": "100",
      "x-ratelimit-reset-tokens": "0s",
    });
    const plain = await t.key();
    const seen: Array<Record<string, string>> = [];
    await t.completion.createChatCompletion(
      { params: hi },
      { ...plain.call, onHeader: (h) => void seen.push(tokenHeaders(h)) },
    );
    expect(seen).toEqual([{}]);
    // Not a chat call: the budget is neither charged nor reported.
    const caller: Array<Record<string, string>> = [];
    await t.identity.getCaller({}, { ...limited.call, onHeader: (h) => void caller.push(tokenHeaders(h)) });
    expect(caller).toEqual([{}]);
  });
});
