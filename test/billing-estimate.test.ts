/**
 * Billing's cost preview and forecast end to end, over Connect on the public port (the path the console
 * takes: the edge forwards `/sluice.billing.v1.BillingService/*` to the core), on the store the project
 * names. The estimate is checked against what real `/v1` calls then do: the hold a running call takes,
 * the refusal a refused call gets, and a ledger the estimate leaves alone.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.ts";
import { BillingService } from "../gen/sluice/billing/v1/billing_service_pb.ts";
import { gatedEngine, registryWith, scriptedEngine } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

/** 10.5 days into November 2026, UTC: the app's clock for the whole file. */
const NOW = Date.parse("2026-11-11T12:00:00Z");
const P = 7; // prompt tokens of one user message "hi"
const hi = [{ role: "user", content: "hi" }];
/** A model that answers one token at 100 micros per input token and 200 per output token. */
const PRICEY = { name: "pricey", inputUsdMicrosPerMillion: 100_000_000, outputUsdMicrosPerMillion: 200_000_000 };

describe("EstimateChatCompletion and the cap forecast on the public port", () => {
  const gated = gatedEngine();
  let app: TestApp;
  let billing: ReturnType<typeof createClient<typeof BillingService>>;
  beforeAll(async () => {
    const models = registryWith([
      { name: "gated", engine: gated },
      { ...PRICEY, engine: scriptedEngine({ deltas: ["ok"] }) },
    ]);
    app = await startTestApp({}, { models, now: () => NOW });
    billing = createClient(BillingService, createConnectTransport({ baseUrl: app.edgeUrl }));
  });
  afterAll(async () => {
    gated.open();
    await app?.close();
  });

  const as = (apiKey: string) => ({ headers: { authorization: `Bearer ${apiKey}` } });
  const chat = (apiKey: string, body: Record<string, unknown>) =>
    fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { ...as(apiKey).headers, "content-type": "application/json" },
      body: JSON.stringify({ messages: hi, ...body }),
    });
  const ledger = async (accountId: string) => {
    const { account } = await app.admin.getAccount({ accountId }, { headers: app.adminHeaders });
    const { usageRecords } = await app.admin.listUsageRecords({ accountId }, { headers: app.adminHeaders });
    return { spent: account?.spentUsdMicros, reserved: account?.reservedUsdMicros, records: usageRecords.length };
  };

  it("estimates the hold a real call then takes, and holds, charges and records nothing", async () => {
    const { accountId, apiKey } = await app.newAccount({ capUsdMicros: 1_000_000n, rps: 1000, burst: 1000 });
    const params = { model: "gated", messages: hi, maxTokens: 50n };
    const estimate = await billing.estimateChatCompletion({ params }, as(apiKey));
    expect(estimate).toMatchObject({
      model: "gated",
      promptTokens: BigInt(P),
      maxOutputTokens: 50n,
      worstCaseCostUsdMicros: BigInt(P + 2 * 50),
      accountBudgetLeftUsdMicros: 1_000_000n,
      admitted: true,
      refusalReason: "",
    });
    expect(await ledger(accountId)).toEqual({ spent: 0n, reserved: 0n, records: 0 });

    const call = chat(apiKey, { model: "gated", max_tokens: 50 });
    await gated.startedCalls(1);
    expect(await ledger(accountId)).toEqual({ spent: 0n, reserved: estimate.worstCaseCostUsdMicros, records: 0 });
    const during = await billing.estimateChatCompletion({ params }, as(apiKey));
    expect(during.accountBudgetLeftUsdMicros).toBe(1_000_000n - BigInt(P + 100));
    expect(await ledger(accountId)).toEqual({ spent: 0n, reserved: estimate.worstCaseCostUsdMicros, records: 0 });
    gated.open();
    expect((await call).status).toBe(200);
    expect(await ledger(accountId)).toEqual({ spent: BigInt(P + 2), reserved: 0n, records: 1 });
    await billing.estimateChatCompletion({ params }, as(apiKey));
    expect(await ledger(accountId)).toEqual({ spent: BigInt(P + 2), reserved: 0n, records: 1 });
  });

  it("answers refusals with the reason the call gets, and fails invalid parameters as the call does", async () => {
    const { apiKey } = await app.newAccount({ capUsdMicros: BigInt(P + 1), rps: 1000, burst: 1000 });
    const cases: Array<[string, Record<string, unknown>, number]> = [
      ["spend_cap_exceeded", {}, 402],
      ["model_not_found", { model: "no-such-model" }, 404],
      ["input_too_large", { messages: [{ role: "user", content: "many words ".repeat(40_000) }] }, 413],
    ];
    for (const [reason, body, status] of cases) {
      const estimate = await billing.estimateChatCompletion({ params: { messages: hi, ...body } }, as(apiKey));
      expect(estimate, reason).toMatchObject({ admitted: false, refusalReason: reason });
      const res = await chat(apiKey, body);
      expect(res.status, reason).toBe(status);
      expect(JSON.stringify(await res.json())).toContain(reason);
    }
    const invalid = await billing.estimateChatCompletion({ params: { messages: hi, temperature: 5 } }, as(apiKey)).then(
      () => undefined,
      (err: unknown) => ConnectError.from(err),
    );
    expect(invalid?.code).toBe(Code.InvalidArgument);
    expect(invalid?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("invalid_request_body");
    expect((await chat(apiKey, { temperature: 5 })).status).toBe(400);
  });

  it("forecasts the day spend reaches the cap at this period's rate", async () => {
    const { apiKey } = await app.newAccount({ capUsdMicros: 2_000n, rps: 1000, burst: 1000 });
    const before = await billing.getBalance({}, as(apiKey));
    expect(before.burnRateUsdMicrosPerDay).toBe(0n);
    expect(before.capReachedDate).toBeUndefined();
    expect((await chat(apiKey, { model: "pricey" })).status).toBe(200);
    // 7 * 100 + 1 * 200 = 900 micros in 10.5 days: 85 a day; the 1,100 left take 12.8 days more.
    expect(await billing.getBalance({}, as(apiKey))).toMatchObject({
      spentUsdMicros: 900n,
      burnRateUsdMicrosPerDay: 85n,
      capReachedDate: "2026-11-24",
    });
  });
});
