import { toJsonString } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ListApiKeysResponseSchema } from "../../../gen/sluice/identity/v1/identity_service_pb.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { generateApiKey, hashApiKey } from "../auth/api-key.ts";

const T0 = Date.UTC(2026, 10, 15, 12, 0, 0);

function setup() {
  const clock = { now: T0 };
  return { clock, ...createCoreFixture({ now: () => clock.now }) };
}

describe("IdentityService.ListApiKeys", () => {
  it("lists the caller's account's keys, oldest first, revoked ones too, without secrets", async () => {
    const { clock, admin, identity, newAccount, newKey } = setup();
    const first = await newAccount({ burst: 100 });
    clock.now += 1_000;
    const second = await newKey(first.accountId, { rateLimitRps: 2.5, burst: 4 });
    clock.now += 1_000;
    const third = await newKey(first.accountId);
    await admin.revokeApiKey({ apiKeyId: third.apiKeyId }, ADMIN);
    await newAccount(); // another account's key is not listed

    const listed = await identity.listApiKeys({}, first.call);
    const { apiKeys } = listed;
    expect(apiKeys.map((k) => k.id)).toEqual([first.apiKeyId, second.apiKeyId, third.apiKeyId]);
    expect(apiKeys[1]).toMatchObject({ id: second.apiKeyId, rateLimitRps: 2.5, burst: 4, revoked: false });
    expect(apiKeys[2]?.revoked).toBe(true);
    expect(apiKeys.map((k) => Number(k.createTime?.seconds))).toEqual([0, 1, 2].map((s) => T0 / 1000 + s));
    for (const [k, key] of [first, second, third].map((t, i) => [apiKeys[i], t] as const))
      expect(key.secret.startsWith(k?.prefix ?? "?")).toBe(true);
    const json = toJsonString(ListApiKeysResponseSchema, listed);
    for (const { secret } of [first, second, third]) {
      expect(json).not.toContain(secret);
      expect(json).not.toContain(hashApiKey(secret));
    }
    // Any of the account's live keys sees the same list.
    expect((await identity.listApiKeys({}, second.call)).apiKeys).toEqual(apiKeys);
  });

  it("refuses a missing, unknown or revoked key", async () => {
    const { admin, identity, newAccount } = setup();
    await expectFailure(() => identity.listApiKeys({}), Code.Unauthenticated, "missing_bearer_token");
    const unknown = { headers: { authorization: `Bearer ${generateApiKey()}` } };
    await expectFailure(() => identity.listApiKeys({}, unknown), Code.Unauthenticated, "invalid_api_key");
    const { apiKeyId, call } = await newAccount();
    await admin.revokeApiKey({ apiKeyId }, ADMIN);
    await expectFailure(() => identity.listApiKeys({}, call), Code.Unauthenticated, "invalid_api_key");
  });

  it("is charged to the key's rate limit like GetCaller", async () => {
    const { identity, newAccount } = setup();
    const { call } = await newAccount({ burst: 2, rateLimitRps: 0.001 });
    let remaining = "";
    await identity.listApiKeys(
      {},
      {
        ...call,
        onHeader: (h) => {
          remaining = h.get("x-ratelimit-remaining-requests") ?? "";
        },
      },
    );
    expect(remaining).toBe("1");
    await identity.getCaller({}, call);
    await expectFailure(() => identity.listApiKeys({}, call), Code.ResourceExhausted, "api_key_rate_limited");
  });
});
