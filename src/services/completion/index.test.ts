import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, RetryInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { AdminService, PaymentStatus, SubscriptionStatus } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import {
  CompletionService,
  FinishReason,
  type ChatParamsSchema,
} from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineRequest } from "../../engines/engine.ts";
import { createModelRegistry, type ModelEntry } from "../../engines/models.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { silentLogger } from "../../logger.ts";
import { createMemoryStore } from "../../store/memory/index.ts";
import { createCore } from "../routes.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/** Mid-month, so that the next UTC period starts in exactly 15.5 days. */
const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const MS_TO_NEXT_PERIOD = 15.5 * 86_400_000;
const ADMIN = { headers: { authorization: "Bearer admin-token-for-tests" } };
const tokenizer = createTokenizer();
const HI_PROMPT_TOKENS = 7;

type Params = MessageInitShape<typeof ChatParamsSchema>;
const hi: Params = { messages: [{ role: "user", content: "hi" }] };

/** Yields `n` one-token deltas of "a" (cut at max_tokens) and records what it was asked. */
function countingEngine(n: number, seen: EngineRequest[] = []): Engine {
  return {
    async *generate(request) {
      seen.push(request);
      const count = Math.min(n, request.maxTokens);
      for (let i = 0; i < count; i++) yield { type: "delta", text: "a", tokens: 1 };
      yield { type: "done", finishReason: n > request.maxTokens ? FinishReason.LENGTH : FinishReason.STOP };
    },
    ready: async () => undefined,
  };
}

/** A core over a memory store; models named in `free` cost nothing. */
function setup(engines: Record<string, Engine> = {}, free: string[] = []) {
  const store = createMemoryStore();
  const clock = { now: NOW };
  const all: Record<string, Engine> = { "service-extract": countingEngine(5), ...engines };
  const entries: ModelEntry[] = Object.keys(all).map((name) => {
    const [input, output] = free.includes(name) ? [0, 0] : [1_000_000, 2_000_000];
    return {
      name,
      engine: "extractive",
      inputUsdMicrosPerMillion: input,
      outputUsdMicrosPerMillion: output,
      free: free.includes(name),
      tokenizer: "o200k_base",
    };
  });
  const models = createModelRegistry(entries, (entry) => {
    const engine = all[entry.name];
    if (!engine) throw new Error(`no engine for ${entry.name}`);
    return engine;
  });
  const core = createCore({
    store,
    models,
    tokenizer,
    logger: silentLogger,
    now: () => clock.now,
    reservationTtlMs: 60_000,
    adminToken: "admin-token-for-tests",
  });
  const transport = createRouterTransport(core.routes, { router: { interceptors: core.interceptors } });
  const admin = createClient(AdminService, transport);
  const completion = createClient(CompletionService, transport);
  const newAccount = async (opts: { cap?: bigint | null; onboarded?: boolean } = {}) => {
    const cap = opts.cap === undefined ? 10_000_000n : opts.cap;
    const { account } = await admin.createAccount(
      { onboardingComplete: opts.onboarded ?? true, ...(cap !== null && { spendCapUsdMicros: cap }) },
      ADMIN,
    );
    const accountId = account?.id ?? "";
    const { secret } = await admin.createApiKey({ accountId, burst: 1_000 }, ADMIN);
    return { accountId, call: { headers: { authorization: `Bearer ${secret}` } } };
  };
  return { store, clock, admin, completion, newAccount };
}

/** Runs `run`, expects it to fail, and checks the Connect code and the one ErrorInfo reason. */
async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

describe("CompletionService", () => {
  it("answers a unary call with the content, the finish reason and the usage", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const res = await completion.createChatCompletion({ params: hi }, call);
    expect(res.id).toMatch(/^chatcmpl-[A-Za-z0-9]+$/);
    expect(res.model).toBe("service-extract");
    expect(res.created).toBe(BigInt(Math.floor(NOW / 1000)));
    expect(res.content).toBe("aaaaa");
    expect(res.finishReason).toBe(FinishReason.STOP);
    expect(res.usage).toMatchObject({
      promptTokens: BigInt(HI_PROMPT_TOKENS),
      completionTokens: 5n,
      totalTokens: BigInt(HI_PROMPT_TOKENS + 5),
    });
  });

  it("streams deltas, then the finish reason, then the usage, all under one id", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const events = await drain(completion.streamChatCompletion({ params: hi }, call));
    expect(events.map((e) => e.event.case)).toEqual([
      "delta",
      "delta",
      "delta",
      "delta",
      "delta",
      "finishReason",
      "usage",
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(1);
    expect(events[0]?.id).toMatch(/^chatcmpl-/);
    expect(
      events
        .filter((e) => e.event.case === "delta")
        .map((e) => e.event.value)
        .join(""),
    ).toBe("aaaaa");
    expect(events[5]?.event.value).toBe(FinishReason.STOP);
    expect(events[6]?.event).toMatchObject({
      case: "usage",
      value: { promptTokens: 7n, completionTokens: 5n, totalTokens: 12n },
    });
  });

  it("reads a prompt as one user message", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const res = await completion.createChatCompletion({ params: { prompt: "hi" } }, call);
    expect(res.usage?.promptTokens).toBe(BigInt(HI_PROMPT_TOKENS));
  });

  it("clamps max_tokens to 4096 when missing, zero, negative or higher", async () => {
    const seen: EngineRequest[] = [];
    const { completion, newAccount } = setup({ "service-extract": countingEngine(1, seen) });
    const { call } = await newAccount();
    for (const maxTokens of [undefined, 0n, -5n, 4097n, 1_000_000n, 4096n, 3n]) {
      await completion.createChatCompletion({ params: { ...hi, ...(maxTokens !== undefined && { maxTokens }) } }, call);
    }
    expect(seen.map((r) => r.maxTokens)).toEqual([4096, 4096, 4096, 4096, 4096, 4096, 3]);
  });

  it("passes sampling parameters to the engine", async () => {
    const seen: EngineRequest[] = [];
    const { completion, newAccount } = setup({ "service-extract": countingEngine(1, seen) });
    const { call } = await newAccount();
    await completion.createChatCompletion(
      { params: { ...hi, temperature: 0.5, topP: 0.9, stop: ["x"], seed: 4n } },
      call,
    );
    expect(seen[0]).toMatchObject({ model: "service-extract", temperature: 0.5, topP: 0.9, stop: ["x"], seed: 4n });
  });

  it("lists the served models", async () => {
    const { completion, newAccount } = setup({ other: countingEngine(1) });
    const { call } = await newAccount();
    const { models } = await completion.listModels({}, call);
    expect(models.map((m) => m.id).sort()).toEqual(["other", "service-extract"]);
  });

  it("refuses a call without a bearer token, unary and streaming", async () => {
    const { completion } = setup();
    await expectFailure(
      () => completion.createChatCompletion({ params: hi }),
      Code.Unauthenticated,
      "missing_bearer_token",
    );
    await expectFailure(
      () => drain(completion.streamChatCompletion({ params: hi })),
      Code.Unauthenticated,
      "missing_bearer_token",
    );
  });

  describe("validation", () => {
    const cases: [string, Params, string][] = [
      ["no messages and no prompt", {}, "messages"],
      ["temperature 3", { ...hi, temperature: 3 }, "temperature"],
      ["n 9", { ...hi, n: 9 }, "n"],
      ["n 0", { ...hi, n: 0 }, "n"],
      ["both prompt and messages", { ...hi, prompt: "hi" }, "prompt"],
      ["top_p 1.5", { ...hi, topP: 1.5 }, "topP"],
      ["five stop strings", { ...hi, stop: ["a", "b", "c", "d", "e"] }, "stop"],
      ["an unknown role", { messages: [{ role: "robot", content: "hi" }] }, "messages.0.role"],
    ];
    it.each(cases)("refuses %s with invalid_request_body", async (_name, params, field) => {
      const { completion, newAccount } = setup();
      const { call } = await newAccount();
      const err = await expectFailure(
        () => completion.createChatCompletion({ params }, call),
        Code.InvalidArgument,
        "invalid_request_body",
      );
      expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.field).toBe(field);
      await expectFailure(
        () => drain(completion.streamChatCompletion({ params }, call)),
        Code.InvalidArgument,
        "invalid_request_body",
      );
    });
  });

  describe("account status", () => {
    it("refuses an account without a cap, or not onboarded, with onboarding_incomplete", async () => {
      const { completion, newAccount } = setup();
      for (const opts of [{ cap: null }, { onboarded: false }]) {
        const { call } = await newAccount(opts);
        await expectFailure(
          () => completion.createChatCompletion({ params: hi }, call),
          Code.FailedPrecondition,
          "onboarding_incomplete",
        );
        await expectFailure(
          () => drain(completion.streamChatCompletion({ params: hi }, call)),
          Code.FailedPrecondition,
          "onboarding_incomplete",
        );
      }
    });

    it("refuses a failed payment and a cancelled subscription", async () => {
      const { admin, completion, newAccount } = setup();
      const failed = await newAccount();
      await admin.updateAccount({ accountId: failed.accountId, paymentStatus: PaymentStatus.FAILED }, ADMIN);
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, failed.call),
        Code.FailedPrecondition,
        "payment_failed",
      );
      const canceled = await newAccount();
      await admin.updateAccount(
        { accountId: canceled.accountId, subscriptionStatus: SubscriptionStatus.CANCELED },
        ADMIN,
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, canceled.call),
        Code.FailedPrecondition,
        "subscription_canceled",
      );
      await admin.updateAccount(
        { accountId: canceled.accountId, subscriptionStatus: SubscriptionStatus.ACTIVE },
        ADMIN,
      );
      expect((await completion.createChatCompletion({ params: hi }, canceled.call)).content).toBe("aaaaa");
    });
  });

  it("refuses an unknown model with model_not_found", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, model: "gpt-9" } }, call),
      Code.NotFound,
      "model_not_found",
    );
  });

  it("admits exactly 32,768 input tokens and refuses one more with input_too_large", async () => {
    const { completion, newAccount } = setup();
    const { call } = await newAccount();
    const words = (n: number) => `hello${" hello".repeat(n - 1)}`;
    expect(tokenizer.countMessages([{ role: "user", content: words(32_762) }], 1e9)).toBe(32_768);
    const ok = await completion.createChatCompletion(
      { params: { messages: [{ role: "user", content: words(32_762) }] } },
      call,
    );
    expect(ok.usage?.promptTokens).toBe(32_768n);
    const big: Params = { messages: [{ role: "user", content: words(32_763) }] };
    await expectFailure(
      () => completion.createChatCompletion({ params: big }, call),
      Code.InvalidArgument,
      "input_too_large",
    );
    await expectFailure(
      () => drain(completion.streamChatCompletion({ params: big }, call)),
      Code.InvalidArgument,
      "input_too_large",
    );
  });

  it("refuses a call the cap cannot admit with spend_cap_exceeded and the time to the next period", async () => {
    const { admin, completion, newAccount } = setup();
    // The prompt plus one output token costs 7 + 2 = 9 micros.
    const { accountId, call } = await newAccount({ cap: 8n });
    const err = await expectFailure(
      () => completion.createChatCompletion({ params: hi }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(err.findDetails(RetryInfoSchema)).toHaveLength(1);
    expect(retryAfterMsOf(err)).toBe(MS_TO_NEXT_PERIOD);
    const streamed = await expectFailure(
      () => drain(completion.streamChatCompletion({ params: hi }, call)),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    expect(retryAfterMsOf(streamed)).toBe(MS_TO_NEXT_PERIOD);
    // Refused at admission: nothing was held or charged.
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
    const enough = await newAccount({ cap: 9n });
    expect((await completion.createChatCompletion({ params: { ...hi, maxTokens: 1n } }, enough.call)).content).toBe(
      "a",
    );
  });

  it("admits calls again once the UTC month rolls over", async () => {
    const { admin, clock, completion, newAccount } = setup();
    const { accountId, call } = await newAccount({ cap: 20n });
    await completion.createChatCompletion({ params: hi }, call);
    await expectFailure(
      () => completion.createChatCompletion({ params: hi }, call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    clock.now = Date.UTC(2026, 11, 1, 0, 0, 0);
    expect((await completion.createChatCompletion({ params: hi }, call)).content).toBe("aaaaa");
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      period: "2026-12",
      spentUsdMicros: 17n,
      reservedUsdMicros: 0n,
    });
  });

  it("never lets a free model pass the cap: it needs budget left but charges nothing", async () => {
    const { admin, completion, newAccount } = setup({ gratis: countingEngine(3) }, ["gratis"]);
    const spentUp = await newAccount({ cap: 0n });
    await expectFailure(
      () => completion.createChatCompletion({ params: { ...hi, model: "gratis" } }, spentUp.call),
      Code.ResourceExhausted,
      "spend_cap_exceeded",
    );
    const { accountId, call } = await newAccount({ cap: 1n });
    expect((await completion.createChatCompletion({ params: { ...hi, model: "gratis" } }, call)).content).toBe("aaa");
    expect((await admin.getAccount({ accountId }, ADMIN)).account).toMatchObject({
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
  });

  describe("check order", () => {
    it("validates before it checks the account", async () => {
      const { completion, newAccount } = setup();
      const { call } = await newAccount({ onboarded: false });
      await expectFailure(
        () => completion.createChatCompletion({ params: {} }, call),
        Code.InvalidArgument,
        "invalid_request_body",
      );
    });

    it("checks the account before the model, the model before the size, the size before the cap", async () => {
      const { completion, newAccount } = setup();
      const big = `hello${" hello".repeat(40_000)}`;
      const notOnboarded = await newAccount({ onboarded: false });
      await expectFailure(
        () => completion.createChatCompletion({ params: { ...hi, model: "nope" } }, notOnboarded.call),
        Code.FailedPrecondition,
        "onboarding_incomplete",
      );
      const { call } = await newAccount({ cap: 0n });
      await expectFailure(
        () => completion.createChatCompletion({ params: { model: "nope", prompt: big } }, call),
        Code.NotFound,
        "model_not_found",
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: { prompt: big } }, call),
        Code.InvalidArgument,
        "input_too_large",
      );
      await expectFailure(
        () => completion.createChatCompletion({ params: hi }, call),
        Code.ResourceExhausted,
        "spend_cap_exceeded",
      );
    });
  });
});
