import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AdminService } from "../../../gen/sluice/admin/v1/admin_service_pb.ts";
import { CompletionService, FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { createModelRegistry, BUILTIN_MODELS } from "../../engines/models.ts";
import { createTokenizer } from "../../engines/tokenizer.ts";
import { silentLogger } from "../../logger.ts";
import { createMemoryStore } from "../../store/memory/index.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { gatedStore } from "../../testing/gated-store.ts";
import { createCore } from "../routes.ts";

const ADMIN = { headers: { authorization: "Bearer admin-token-for-tests" } };

describe("admission", () => {
  it("releases the hold an admission may have taken when its reply is lost", async () => {
    const store = gatedStore(createMemoryStore());
    const engine = {
      async *generate() {
        yield { type: "delta" as const, text: "ok", tokens: 1 };
        yield { type: "done" as const, finishReason: FinishReason.STOP };
      },
      ready: async () => undefined,
    };
    const core = createCore({
      store,
      models: createModelRegistry(BUILTIN_MODELS, () => engine),
      tokenizer: createTokenizer(),
      logger: silentLogger,
      now: Date.now,
      reservationTtlMs: 60_000,
      adminToken: "admin-token-for-tests",
    });
    const transport = createRouterTransport(core.routes, { router: { interceptors: core.interceptors } });
    const admin = createClient(AdminService, transport);
    const completion = createClient(CompletionService, transport);
    const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: 1_000_000n }, ADMIN);
    const accountId = account?.id ?? "";
    const { secret } = await admin.createApiKey({ accountId, burst: 100 }, ADMIN);
    const call = { headers: { authorization: `Bearer ${secret}` } };
    const params = { messages: [{ role: "user", content: "hello" }] };

    store.loseReply("admit");
    await expectFailure(
      () => completion.createChatCompletion({ params }, call),
      Code.Unavailable,
      "service_unavailable",
    );
    // The release runs in the background, after the caller got its 503: wait for it.
    expect(await core.calls.drain(5000)).toBe(true);
    const after = await admin.getAccount({ accountId }, ADMIN);
    expect(after.account?.reservedUsdMicros).toBe(0n);
    expect(after.account?.spentUsdMicros).toBe(0n);

    const ok = await completion.createChatCompletion({ params }, call);
    expect(ok.content).toBe("ok");
  });
});
