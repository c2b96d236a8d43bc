import { create } from "@bufbuild/protobuf";
import { type Duration, DurationSchema, durationFromMs, timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { ADMIN, createCoreFixture, type TestKey } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { displayPrefix, isWellFormedApiKey } from "../auth/api-key.ts";
import { type Expiration, MAX_GRACE_PERIOD_MS, MAX_KEY_LIFETIME_MS } from "./key-times.ts";

const START = Date.UTC(2026, 10, 15, 12, 0, 0);
const DAY_MS = 86_400_000;

/** A core on a clock the test moves, with one account and key. */
async function setup(limits: { rateLimitRps?: number; burst?: number } = {}) {
  const clock = { now: START };
  const fixture = createCoreFixture({ now: () => clock.now });
  const key = await fixture.newAccount({ rateLimitRps: 1000, burst: 1000, ...limits });
  const bearer = (secret: string) => ({ headers: { authorization: `Bearer ${secret}` } });
  /** Resolves the key id the secret authenticates as, or rejects as the call would. */
  const caller = (secret: string) => fixture.identity.getCaller({}, bearer(secret));
  const refused = (secret: string) => expectFailure(() => caller(secret), Code.Unauthenticated, "invalid_api_key");
  const rotate = (request: { gracePeriod?: Duration; expiration?: Expiration } = {}) =>
    fixture.admin.rotateApiKey({ apiKeyId: key.apiKeyId, ...request }, ADMIN);
  return { ...fixture, clock, key, bearer, caller, refused, rotate };
}

/** Asserts a call fails with 400 invalid_argument naming `field`. */
async function expectInvalid(run: () => Promise<unknown>, field: string) {
  const err = await expectFailure(run, Code.InvalidArgument, "invalid_argument");
  expect(err.findDetails(ErrorInfoSchema)[0]?.metadata.field).toBe(field);
}

const grace = (ms: number) => ({ gracePeriod: durationFromMs(ms) });

describe("AdminService.RotateApiKey", () => {
  it("issues a new secret for the same key (id, account, limits); the old one shown until its grace ends", async () => {
    const { rotate, key, admin } = await setup({ rateLimitRps: 7, burst: 9 });
    const { apiKey, secret } = await rotate(grace(60_000));
    expect(isWellFormedApiKey(secret)).toBe(true);
    expect(secret).not.toBe(key.secret);
    expect(apiKey).toMatchObject({
      id: key.apiKeyId,
      accountId: key.accountId,
      prefix: displayPrefix(secret),
      rateLimitRps: 7,
      burst: 9,
      revoked: false,
      previousPrefix: displayPrefix(key.secret),
    });
    expect(apiKey?.expireTime).toBeUndefined();
    expect(apiKey?.previousExpireTime && timestampMs(apiKey.previousExpireTime)).toBe(START + 60_000);
    const { apiKeys } = await admin.listApiKeys({ accountId: key.accountId }, ADMIN);
    expect(apiKeys).toEqual([apiKey]);
  });

  it("accepts the new secret at once and the old one until the grace period ends, then only the new", async () => {
    const { rotate, key, caller, refused, clock, identity, bearer } = await setup();
    const { secret } = await rotate(grace(30_000));
    expect((await caller(secret)).apiKeyId).toBe(key.apiKeyId);
    clock.now = START + 29_999;
    expect((await caller(key.secret)).apiKeyId).toBe(key.apiKeyId);
    clock.now = START + 30_000;
    await refused(key.secret);
    expect((await caller(secret)).apiKeyId).toBe(key.apiKeyId);
    // The holder's own listing drops the replaced secret once it works no more.
    const [listed] = (await identity.listApiKeys({}, bearer(secret))).apiKeys;
    expect({ prefix: listed?.prefix, previous: listed?.previousPrefix }).toEqual({
      prefix: displayPrefix(secret),
      previous: "",
    });
    expect(listed?.previousExpireTime).toBeUndefined();
  });

  it("without a grace period ends the old secret at once", async () => {
    const { rotate, key, caller, refused } = await setup();
    const { secret, apiKey } = await rotate();
    await refused(key.secret);
    expect((await caller(secret)).apiKeyId).toBe(key.apiKeyId);
    expect(apiKey?.previousPrefix).toBe("");
  });

  it("rotated again in a grace: the older secret ends at once, the replaced one gets the new grace", async () => {
    const { rotate, key, caller, refused, clock } = await setup();
    const first = await rotate(grace(DAY_MS));
    clock.now = START + 1_000;
    const second = await rotate(grace(5_000));
    expect(second.apiKey?.previousPrefix).toBe(displayPrefix(first.secret));
    await refused(key.secret);
    expect((await caller(first.secret)).apiKeyId).toBe(key.apiKeyId);
    expect((await caller(second.secret)).apiKeyId).toBe(key.apiKeyId);
    clock.now = START + 6_000;
    await refused(first.secret);
    expect((await caller(second.secret)).apiKeyId).toBe(key.apiKeyId);
  });

  it("keeps the key's rate-limit state: a burst spent with the old secret is spent for the new one", async () => {
    const { rotate, key, caller } = await setup({ rateLimitRps: 0.001, burst: 2 });
    await caller(key.secret);
    await caller(key.secret);
    const { secret } = await rotate(grace(60_000));
    await expectFailure(() => caller(secret), Code.ResourceExhausted, "api_key_rate_limited");
    await expectFailure(() => caller(key.secret), Code.ResourceExhausted, "api_key_rate_limited");
  });

  it("revoking the key ends both secrets, and a revoked key is not rotated", async () => {
    const { rotate, key, refused, admin } = await setup();
    const { secret } = await rotate(grace(60_000));
    const { apiKey } = await admin.revokeApiKey({ apiKeyId: key.apiKeyId }, ADMIN);
    expect(apiKey).toMatchObject({ revoked: true, previousPrefix: "" });
    await refused(key.secret);
    await refused(secret);
    await expectInvalid(() => rotate(), "api_key_id");
  });

  it("answers NotFound api_key_not_found for an unknown key and 400 for a missing id", async () => {
    const { admin } = await setup();
    await expectFailure(() => admin.rotateApiKey({ apiKeyId: "key_nope" }, ADMIN), Code.NotFound, "api_key_not_found");
    await expectInvalid(() => admin.rotateApiKey({ apiKeyId: "" }, ADMIN), "api_key_id");
  });

  it.each([
    ["negative", { seconds: -1n, nanos: 0 }],
    ["negative nanos", { seconds: 0n, nanos: -1 }],
    ["past 30 days", { seconds: BigInt(MAX_GRACE_PERIOD_MS / 1000), nanos: 1_000_000 }],
  ])("refuses a grace period %s with 400 naming grace_period", async (_name, duration) => {
    const { rotate, caller, key } = await setup();
    await expectInvalid(() => rotate({ gracePeriod: create(DurationSchema, duration) }), "grace_period");
    expect((await caller(key.secret)).apiKeyId).toBe(key.apiKeyId);
  });

  it("takes exactly 30 days of grace", async () => {
    const { rotate } = await setup();
    const { apiKey } = await rotate(grace(MAX_GRACE_PERIOD_MS));
    expect(apiKey?.previousExpireTime && timestampMs(apiKey.previousExpireTime)).toBe(START + MAX_GRACE_PERIOD_MS);
  });
});

describe("API key expiry", () => {
  /** A second key on the setup's account, with an expiration. */
  async function keyWith(
    s: Awaited<ReturnType<typeof setup>>,
    expiration: Expiration,
  ): Promise<TestKey & { expireMs: number | undefined }> {
    const { apiKey, secret } = await s.admin.createApiKey({ accountId: s.key.accountId, expiration }, ADMIN);
    const authorization = `Bearer ${secret}`;
    return {
      accountId: s.key.accountId,
      apiKeyId: apiKey?.id ?? "",
      secret,
      authorization,
      call: { headers: { authorization } },
      expireMs: apiKey?.expireTime && timestampMs(apiKey.expireTime),
    };
  }

  it.each([
    ["a ttl", { case: "ttl", value: durationFromMs(10_000) }],
    ["an expire_time", { case: "expireTime", value: timestampFromMs(START + 10_000) }],
  ] as const)(
    "a key created with %s works until then and gets 401 invalid_api_key after",
    async (_name, expiration) => {
      const s = await setup();
      const key = await keyWith(s, expiration);
      expect(key.expireMs).toBe(START + 10_000);
      s.clock.now = START + 9_999;
      expect((await s.caller(key.secret)).apiKeyId).toBe(key.apiKeyId);
      s.clock.now = START + 10_000;
      await s.refused(key.secret);
      const { apiKeys } = await s.admin.listApiKeys({ accountId: key.accountId }, ADMIN);
      expect(apiKeys.find((k) => k.id === key.apiKeyId)?.expireTime).toEqual(timestampFromMs(START + 10_000));
    },
  );

  it("a rotation keeps the expiry unless it sets one; an expired key is rotated only with a new one", async () => {
    const s = await setup();
    const key = await keyWith(s, { case: "ttl", value: durationFromMs(10_000) });
    const kept = await s.admin.rotateApiKey({ apiKeyId: key.apiKeyId, ...grace(60_000) }, ADMIN);
    expect(kept.apiKey?.expireTime).toEqual(timestampFromMs(START + 10_000));
    s.clock.now = START + 10_000;
    await s.refused(kept.secret);
    await expectInvalid(() => s.admin.rotateApiKey({ apiKeyId: key.apiKeyId }, ADMIN), "expire_time");
    await s.refused(kept.secret);
    const renewed = await s.admin.rotateApiKey(
      { apiKeyId: key.apiKeyId, ...grace(0), expiration: { case: "ttl", value: durationFromMs(DAY_MS) } },
      ADMIN,
    );
    expect(renewed.apiKey?.expireTime).toEqual(timestampFromMs(START + 10_000 + DAY_MS));
    expect((await s.caller(renewed.secret)).apiKeyId).toBe(key.apiKeyId);
    await s.refused(kept.secret);
  });

  it.each([
    ["a ttl of 0", "ttl", { case: "ttl", value: durationFromMs(0) }],
    ["a negative ttl", "ttl", { case: "ttl", value: durationFromMs(-1000) }],
    ["a ttl past 10 years", "ttl", { case: "ttl", value: durationFromMs(MAX_KEY_LIFETIME_MS + 1) }],
    ["an expire_time now", "expire_time", { case: "expireTime", value: timestampFromMs(START) }],
    [
      "an expire_time past 10 years",
      "expire_time",
      { case: "expireTime", value: timestampFromMs(START + 2 * MAX_KEY_LIFETIME_MS) },
    ],
  ] as const)("refuses %s with 400 naming the field, and issues no key", async (_name, field, expiration) => {
    const s = await setup();
    await expectInvalid(() => s.admin.createApiKey({ accountId: s.key.accountId, expiration }, ADMIN), field);
    await expectInvalid(() => s.rotate({ expiration }), field);
    const { apiKeys } = await s.admin.listApiKeys({ accountId: s.key.accountId }, ADMIN);
    expect(apiKeys.map((k) => k.prefix)).toEqual([displayPrefix(s.key.secret)]);
  });
});
