import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { retryAfterMsOf, UNAVAILABLE_RETRY_MS } from "../errors/catalogue.ts";
import { createMemoryStore } from "../store/memory/index.ts";
import type { Store } from "../store/store.ts";
import { createCoreFixture } from "../testing/core-fixture.ts";
import { expectFailure } from "../testing/expect-failure.ts";

/**
 * Errors that reach the RPC boundary without a catalogue reason: an unavailable dependency
 * becomes `service_unavailable` with a `RetryInfo`, so gRPC and Connect callers get the delay
 * HTTP callers get as `Retry-After` (issue 11, item 5).
 */
describe("the RPC boundary", () => {
  it("answers an uncatalogued Unavailable with service_unavailable and RetryInfo", async () => {
    const inner = createMemoryStore();
    const failing = { on: false };
    const store: Store = {
      ...inner,
      getAccount: (accountId) =>
        failing.on ? Promise.reject(new ConnectError("socket closed", Code.Unavailable)) : inner.getAccount(accountId),
    };
    const { completion, newAccount } = createCoreFixture({ store });
    const { call } = await newAccount({ burst: 100 });
    failing.on = true;
    const err = await expectFailure(
      () => completion.createChatCompletion({ params: { messages: [{ role: "user", content: "hi" }] } }, call),
      Code.Unavailable,
      "service_unavailable",
    );
    expect(retryAfterMsOf(err)).toBe(UNAVAILABLE_RETRY_MS);
    expect(err.rawMessage).not.toContain("socket closed");
  });
});
