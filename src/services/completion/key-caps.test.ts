import { Code, type ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { contractBackends } from "../../store/contract/support.ts";
import { ADMIN } from "../../testing/core-fixture.ts";
import { drain } from "../../testing/drain.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { HI_PROMPT, hi, keyLimitsCore, MS_TO_NEXT_PERIOD, TTL } from "../../testing/key-limits-core.ts";

/**
 * Key caps through the chat RPCs, on both stores: a call is admitted only when its key's own cap
 * and its account's have room; a refusal is `spend_cap_exceeded` with `ErrorInfo.metadata.cap`
 * "key" (temporary or not, as for the account's cap); a running stream is cut at the key's cap;
 * and a settle charges both, as Admin and the key holder see.
 */
const metadataOf = (err: ConnectError) => err.findDetails(ErrorInfoSchema)[0]?.metadata;

describe.each(contractBackends().slice(0, 2))("key caps on %s", (_name, makeStore) => {
  it("refuses a call its key's spent cap cannot cover, for good, while another key of the account runs", async () => {
    const t = await keyLimitsCore(makeStore, 10_000n);
    const capped = await t.key({ spendCapUsdMicros: 20n });
    const open = await t.key();
    // 7 + 2 * 4 = 15 of the key's 20.
    const first = await t.completion.createChatCompletion({ params: { ...hi, maxTokens: 4n } }, capped.call);
    expect(first.usage?.costUsdMicros).toBe(15n);
    const err = await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, capped.call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(metadataOf(err)).toEqual({ temporary: "false", cap: "key" });
    expect(retryAfterMsOf(err)).toBe(MS_TO_NEXT_PERIOD);
    expect(err.rawMessage).toMatch(/API key's monthly spend cap/);
    // Billing's estimate applies the same rule: the key's 5 left do not cover 7 + 2.
    const estimate = await t.billing.estimateChatCompletion({ params: hi }, capped.call);
    expect(estimate).toMatchObject({
      keyBudgetLeftUsdMicros: 5n,
      admitted: false,
      refusalReason: "spend_cap_exceeded",
    });
    const other = await t.completion.createChatCompletion({ params: { ...hi, maxTokens: 4n } }, open.call);
    expect(other.usage?.costUsdMicros).toBe(15n);

    const keys = await t.adminKeys();
    expect(keys.get(capped.apiKeyId)).toMatchObject({
      spendCapUsdMicros: 20n,
      spentUsdMicros: 15n,
      reservedUsdMicros: 0n,
    });
    expect(keys.get(open.apiKeyId)).toMatchObject({ spentUsdMicros: 15n, reservedUsdMicros: 0n });
    expect(keys.get(open.apiKeyId)?.spendCapUsdMicros).toBeUndefined();
    expect(await t.balance()).toEqual({ spent: 30, reserved: 0 });
    // The key holder sees the same on its own keys.
    const own = (await t.identity.listApiKeys({}, capped.call)).apiKeys.find((k) => k.id === capped.apiKeyId);
    expect(own).toMatchObject({ spendCapUsdMicros: 20n, spentUsdMicros: 15n });
  });

  it("refuses a call only its key's other calls keep out as temporary, until their holds clear", async () => {
    const t = await keyLimitsCore(makeStore, 10_000n);
    const capped = await t.key({ spendCapUsdMicros: 100n });
    const open = await t.key();
    // The holder reserves 7 + 2 * 46 = 99 of the key's 100; the account has plenty.
    const holding = t.completion.createChatCompletion(
      { params: { ...hi, model: "holder", maxTokens: 46n } },
      capped.call,
    );
    await t.holder.started;
    t.clock.now += 5_000;
    const err = await expectFailure(
      () => drain(t.completion.streamChatCompletion({ params: hi }, capped.call)),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(metadataOf(err)).toEqual({ temporary: "true", cap: "key" });
    expect(retryAfterMsOf(err)).toBe(TTL - 5_000);
    expect((await t.adminKeys()).get(capped.apiKeyId)?.reservedUsdMicros).toBe(99n);
    expect((await t.completion.createChatCompletion({ params: hi }, open.call)).usage?.completionTokens).toBe(10n);
    t.gate.open();
    expect((await holding).usage?.costUsdMicros).toBe(BigInt(HI_PROMPT + 2));
    expect((await t.completion.createChatCompletion({ params: hi }, capped.call)).usage?.costUsdMicros).toBe(27n);
  });

  it("cuts a stream at its key's cap, charges the delivered tokens to the key and the account", async () => {
    const t = await keyLimitsCore(makeStore, 10_000n);
    const capped = await t.key({ spendCapUsdMicros: 30n });
    let deltas = 0;
    const err = await expectFailure(
      async () => {
        for await (const m of t.completion.streamChatCompletion({ params: { ...hi, model: "long" } }, capped.call))
          if (m.event.case === "delta") deltas += 1;
      },
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    // The key's 30 cover the prompt and 11 tokens (7 + 22 = 29); the 12th needs 31.
    expect(deltas).toBe(11);
    expect(metadataOf(err)).toEqual({ temporary: "false", cap: "key" });
    expect((await t.adminKeys()).get(capped.apiKeyId)).toMatchObject({ spentUsdMicros: 29n, reservedUsdMicros: 0n });
    expect(await t.balance()).toEqual({ spent: 29, reserved: 0 });
  });

  it("names the account's cap when the account is what is spent", async () => {
    const t = await keyLimitsCore(makeStore, 8n);
    const capped = await t.key({ spendCapUsdMicros: 1_000n });
    const err = await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, capped.call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(metadataOf(err)).toEqual({ temporary: "false", cap: "account" });
  });

  it("obeys a cap an operator sets, changes or removes on the next call", async () => {
    const t = await keyLimitsCore(makeStore, 10_000n);
    const k = await t.key();
    const set = await t.admin.updateApiKey({ apiKeyId: k.apiKeyId, spendCapUsdMicros: 0n }, ADMIN);
    expect(set.apiKey).toMatchObject({ id: k.apiKeyId, spendCapUsdMicros: 0n, spentUsdMicros: 0n });
    await expectFailure(
      () => t.completion.createChatCompletion({ params: hi }, k.call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    const cleared = await t.admin.updateApiKey(
      { apiKeyId: k.apiKeyId, updateMask: { paths: ["spend_cap_usd_micros"] } },
      ADMIN,
    );
    expect(cleared.apiKey?.spendCapUsdMicros).toBeUndefined();
    expect((await t.completion.createChatCompletion({ params: hi }, k.call)).usage?.costUsdMicros).toBe(27n);
  });
});
