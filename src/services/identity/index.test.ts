import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RetryInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { retryAfterMsOf } from "../../errors/catalogue.ts";
import { generateApiKey } from "../auth/api-key.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

const T0 = Date.UTC(2026, 10, 15, 12, 0, 0);
function setup() {
  const clock = { now: T0 };
  const { admin, identity, completion, newAccount } = createCoreFixture({ now: () => clock.now });
  const newKey = (limits: { rateLimitRps?: number; burst?: number } = {}) =>
    newAccount({ capUsdMicros: 1_000_000n, ...limits });
  return { clock, admin, identity, completion, newKey };
}

describe("IdentityService and caller authentication", () => {
  it("names the caller's account and key, without an email", async () => {
    const { identity, newKey } = setup();
    const { accountId, apiKeyId, authorization } = await newKey();
    const me = await identity.getCaller({}, { headers: { authorization } });
    expect(me.id).toBe(accountId);
    expect(me.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(me.email).toBeUndefined();
    expect(me.apiKeyId).toBe(apiKeyId);
  });

  it.each([
    ["no header", undefined],
    ["an empty header", ""],
    ["a Basic header", "Basic dXNlcjpwYXNz"],
    ["a bare Bearer", "Bearer"],
  ])("refuses %s with missing_bearer_token", async (_name, authorization) => {
    const { identity } = setup();
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
    await expectFailure(() => identity.getCaller({}, { headers }), Code.Unauthenticated, "missing_bearer_token");
  });

  it("refuses malformed, unknown and revoked keys with invalid_api_key", async () => {
    const { admin, identity, newKey } = setup();
    const { secret, apiKeyId, authorization } = await newKey();
    const flipped = `${secret.slice(0, -1)}${secret.endsWith("0") ? "1" : "0"}`;
    for (const bad of ["svc_sk_short", "not-a-key", flipped, generateApiKey(), "admin-token-for-tests"]) {
      await expectFailure(
        () => identity.getCaller({}, { headers: { authorization: `Bearer ${bad}` } }),
        Code.Unauthenticated,
        "invalid_api_key",
      );
    }
    await identity.getCaller({}, { headers: { authorization } });
    await admin.revokeApiKey({ apiKeyId }, ADMIN);
    await expectFailure(
      () => identity.getCaller({}, { headers: { authorization } }),
      Code.Unauthenticated,
      "invalid_api_key",
    );
  });

  it("rate-limits a key with api_key_rate_limited, RetryInfo and the x-ratelimit headers", async () => {
    const { clock, identity, newKey } = setup();
    const { authorization } = await newKey({ rateLimitRps: 10, burst: 2 });
    const seen: Record<string, string>[] = [];
    const onHeader = (h: Headers) =>
      seen.push(Object.fromEntries([...h].filter(([k]) => k.startsWith("x-ratelimit-"))));
    await identity.getCaller({}, { headers: { authorization }, onHeader });
    await identity.getCaller({}, { headers: { authorization }, onHeader });
    expect(seen).toEqual([
      {
        "x-ratelimit-limit-requests": "2",
        "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "100ms",
      },
      {
        "x-ratelimit-limit-requests": "2",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "200ms",
      },
    ]);
    const err = await expectFailure(
      () => identity.getCaller({}, { headers: { authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    expect(err.findDetails(RetryInfoSchema)).toHaveLength(1);
    expect(retryAfterMsOf(err)).toBe(100);
    expect(err.metadata.get("x-ratelimit-remaining-requests")).toBe("0");
    clock.now += 99;
    await expectFailure(
      () => identity.getCaller({}, { headers: { authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    clock.now += 1;
    expect((await identity.getCaller({}, { headers: { authorization } })).id).toMatch(/-/);
  });

  it("gives the default key 10 requests at once, then refuses", async () => {
    const { identity, newKey } = setup();
    const { authorization } = await newKey();
    for (let i = 0; i < 10; i++) await identity.getCaller({}, { headers: { authorization } });
    await expectFailure(
      () => identity.getCaller({}, { headers: { authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
  });

  it("keeps one rate limit per key, shared by every keyed service", async () => {
    const { identity, completion, newKey } = setup();
    const a = await newKey({ burst: 1 });
    const b = await newKey({ burst: 1 });
    await completion.listModels({}, { headers: { authorization: a.authorization } });
    await expectFailure(
      () => identity.getCaller({}, { headers: { authorization: a.authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    await identity.getCaller({}, { headers: { authorization: b.authorization } });
  });

  it("checks the key before the rate limit, and the rate limit before the body", async () => {
    const { identity, completion, newKey } = setup();
    const { authorization } = await newKey({ burst: 1 });
    await identity.getCaller({}, { headers: { authorization } });
    await expectFailure(
      () => completion.createChatCompletion({ params: {} }, { headers: { authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    await expectFailure(
      () => identity.getCaller({}, { headers: { authorization: "Bearer svc_sk_bad" } }),
      Code.Unauthenticated,
      "invalid_api_key",
    );
  });

  it("CheckApiKey checks a key without charging it, so the chat call that follows is charged once", async () => {
    const { identity, completion, newKey } = setup();
    const { authorization } = await newKey({ burst: 1, rateLimitRps: 0.001 });
    for (let i = 0; i < 5; i++)
      expect((await identity.checkApiKey({}, { headers: { authorization } })).apiKeyId).not.toBe("");
    expect(
      (await completion.createChatCompletion({ params: { prompt: "hi" } }, { headers: { authorization } })).choices[0]
        ?.content,
    ).toBe("ok");
    await expectFailure(
      () => completion.createChatCompletion({ params: { prompt: "hi" } }, { headers: { authorization } }),
      Code.ResourceExhausted,
      "api_key_rate_limited",
    );
    await expectFailure(
      () => identity.checkApiKey({}, { headers: { authorization: `Bearer ${generateApiKey()}` } }),
      Code.Unauthenticated,
      "invalid_api_key",
    );
    await expectFailure(
      () => identity.checkApiKey({}, { headers: { authorization: "Bearer svc_sk_bad" } }),
      Code.Unauthenticated,
      "invalid_api_key",
    );
    await expectFailure(() => identity.checkApiKey({}), Code.Unauthenticated, "missing_bearer_token");
  });

  it("GetCaller is always charged: the old edge preflight header is ignored", async () => {
    const { identity, newKey } = setup();
    const { authorization } = await newKey({ burst: 1 });
    const headers = { authorization, "sluice-edge-preflight": "anything" };
    await identity.getCaller({}, { headers });
    await expectFailure(() => identity.getCaller({}, { headers }), Code.ResourceExhausted, "api_key_rate_limited");
  });

  it("echoes a safe x-request-id and makes one up otherwise", async () => {
    const { identity, newKey } = setup();
    const { authorization } = await newKey();
    let echoed = "";
    await identity.getCaller(
      {},
      {
        headers: { authorization, "x-request-id": "req-abc.123" },
        onHeader: (h) => {
          echoed = h.get("x-request-id") ?? "";
        },
      },
    );
    expect(echoed).toBe("req-abc.123");
    await identity.getCaller(
      {},
      {
        headers: { authorization, "x-request-id": "bad id with spaces" },
        onHeader: (h) => {
          echoed = h.get("x-request-id") ?? "";
        },
      },
    );
    expect(echoed).toMatch(/^req_[0-9a-f-]{36}$/);
    const err = await expectFailure(
      () => identity.getCaller({}, { headers: { "x-request-id": "req-err-1" } }),
      Code.Unauthenticated,
      "missing_bearer_token",
    );
    expect(err.metadata.get("x-request-id")).toBe("req-err-1");
  });
});
