import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../store/memory/index.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { okEngine } from "../../testing/engines.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { gatedStore } from "../../testing/gated-store.ts";

describe("admission", () => {
  it("releases the hold an admission may have taken when its reply is lost", async () => {
    const store = gatedStore(createMemoryStore());
    const { core, admin, completion, newAccount } = createCoreFixture({ store, engine: okEngine });
    const { accountId, call } = await newAccount({ capUsdMicros: 1_000_000n, burst: 100 });
    const params = { messages: [{ role: "user", content: "hello" }] };

    store.loseReply("chargeRateLimit");
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
    expect(ok.choices[0]?.content).toBe("ok");
  });
});
