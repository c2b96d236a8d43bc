import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.ts";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";

/**
 * A key's own limits over the Admin API: set at CreateApiKey, changed or removed by UpdateApiKey
 * (AIP-134: the fields set, or those `update_mask` names, a named field left unset removed), and
 * shown on every `ApiKey` with what the key spent and holds this period.
 */
describe("Admin: key limits", () => {
  const setup = async () => {
    const fixture = createCoreFixture();
    const { accountId } = await fixture.newAccount();
    return { ...fixture, accountId };
  };

  it("creates a key with a cap and a token limit, and lists them with its spend", async () => {
    const { admin, accountId } = await setup();
    const created = await admin.createApiKey({ accountId, spendCapUsdMicros: 5_000n, tokensPerMinute: 9_000 }, ADMIN);
    expect(created.apiKey).toMatchObject({
      spendCapUsdMicros: 5_000n,
      tokensPerMinute: 9_000,
      spentUsdMicros: 0n,
      reservedUsdMicros: 0n,
    });
    const listed = (await admin.listApiKeys({ accountId }, ADMIN)).apiKeys.find((k) => k.id === created.apiKey?.id);
    expect(listed).toMatchObject({ spendCapUsdMicros: 5_000n, tokensPerMinute: 9_000 });
  });

  it("changes the fields that are set, or those the mask names, removing a named field left unset", async () => {
    const { admin, accountId } = await setup();
    const { apiKey } = await admin.createApiKey({ accountId, spendCapUsdMicros: 5_000n }, ADMIN);
    const apiKeyId = apiKey?.id ?? "";
    const both = await admin.updateApiKey({ apiKeyId, spendCapUsdMicros: 7n, tokensPerMinute: 60 }, ADMIN);
    expect(both.apiKey).toMatchObject({ spendCapUsdMicros: 7n, tokensPerMinute: 60 });
    // Only the token limit is named: the cap is left alone though it is set here.
    const masked = await admin.updateApiKey(
      { apiKeyId, spendCapUsdMicros: 1n, tokensPerMinute: 30, updateMask: { paths: ["tokens_per_minute"] } },
      ADMIN,
    );
    expect(masked.apiKey).toMatchObject({ spendCapUsdMicros: 7n, tokensPerMinute: 30 });
    const camel = await admin.updateApiKey({ apiKeyId, updateMask: { paths: ["spendCapUsdMicros"] } }, ADMIN);
    expect(camel.apiKey?.spendCapUsdMicros).toBeUndefined();
    expect(camel.apiKey?.tokensPerMinute).toBe(30);
    const all = await admin.updateApiKey({ apiKeyId, spendCapUsdMicros: 9n, updateMask: { paths: ["*"] } }, ADMIN);
    expect(all.apiKey?.spendCapUsdMicros).toBe(9n);
    expect(all.apiKey?.tokensPerMinute).toBeUndefined();
  });

  it("refuses an unknown path, an empty change, bad values and an unknown key", async () => {
    const { admin, accountId } = await setup();
    const { apiKey } = await admin.createApiKey({ accountId }, ADMIN);
    const apiKeyId = apiKey?.id ?? "";
    const fieldOf = async (run: () => Promise<unknown>) =>
      (await expectFailure(run, Code.InvalidArgument, "invalid_argument")).findDetails(ErrorInfoSchema)[0]?.metadata
        .field;
    expect(await fieldOf(() => admin.updateApiKey({ apiKeyId, updateMask: { paths: ["burst"] } }, ADMIN))).toBe(
      "update_mask",
    );
    expect(await fieldOf(() => admin.updateApiKey({ apiKeyId }, ADMIN))).toBe("update_mask");
    expect(await fieldOf(() => admin.updateApiKey({ apiKeyId, spendCapUsdMicros: -1n }, ADMIN))).toBe(
      "spend_cap_usd_micros",
    );
    expect(await fieldOf(() => admin.updateApiKey({ apiKeyId, tokensPerMinute: 0 }, ADMIN))).toBe("tokens_per_minute");
    expect(await fieldOf(() => admin.createApiKey({ accountId, tokensPerMinute: 0 }, ADMIN))).toBe("tokens_per_minute");
    await expectFailure(
      () => admin.updateApiKey({ apiKeyId: "key_missing", spendCapUsdMicros: 1n }, ADMIN),
      Code.NotFound,
      "api_key_not_found",
    );
  });
});
