import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ADMIN, createCoreFixture } from "../../testing/core-fixture.ts";
import { expectFailure } from "../../testing/expect-failure.ts";
import { MAX_SEARCH_RESULTS } from "./index.ts";

const T0 = Date.UTC(2026, 10, 15, 12, 0, 0);

function setup() {
  const clock = { now: T0 };
  const fixture = createCoreFixture({ now: () => clock.now });
  /** Creates an account a second after the last one, so "newest first" has one answer. */
  const create = async (email?: string) => {
    clock.now += 1_000;
    const { account } = await fixture.admin.createAccount(
      { onboardingComplete: true, spendCapUsdMicros: 1_000_000n, ...(email !== undefined && { email }) },
      ADMIN,
    );
    return account?.id ?? "";
  };
  const search = async (query: string) => (await fixture.admin.searchAccounts({ query }, ADMIN)).accounts;
  return { create, search, ...fixture };
}

describe("AdminService.SearchAccounts", () => {
  it("answers an empty query with no accounts, not an error, so the console can check a token with it", async () => {
    const { create, search } = setup();
    await create("ops@example.com");
    expect(await search("")).toEqual([]);
    expect(await search("  \t ")).toEqual([]);
  });

  it("finds an account by its id, mapped as GetAccount maps it (with its period spend)", async () => {
    const { search, completion, newAccount, account } = setup();
    const { accountId, call } = await newAccount();
    await completion.createChatCompletion({ params: { prompt: "hi" } }, call);
    const got = await account(accountId);
    expect(got?.spentUsdMicros).toBeGreaterThan(0n);
    expect(await search(accountId)).toEqual([got]);
    expect(await search(` ${accountId}\n`)).toEqual([got]);
    expect(await search(randomUUID())).toEqual([]);
  });

  it("finds accounts by exact email, ignoring case and spaces, newest first", async () => {
    const { create, search, account } = setup();
    const oldest = await create("Ops@Example.com");
    await create("dev@example.com");
    const middle = await create("ops@example.com");
    await create();
    const newest = await create("OPS@EXAMPLE.COM");
    const expected = await Promise.all([newest, middle, oldest].map(account));
    expect(await search("ops@example.com")).toEqual(expected);
    expect(await search("  oPs@eXample.Com  ")).toEqual(expected);
    for (const miss of ["ops@example", "ops", "example.com", "nobody@example.com"])
      expect(await search(miss)).toEqual([]);
  });

  it(`answers at most ${MAX_SEARCH_RESULTS} accounts, the newest`, async () => {
    const { create, search } = setup();
    const ids: string[] = [];
    for (let i = 0; i <= MAX_SEARCH_RESULTS; i++) ids.unshift(await create("many@example.com"));
    const found = await search("many@example.com");
    expect(found.map((a) => a.id)).toEqual(ids.slice(0, MAX_SEARCH_RESULTS));
  });

  it("refuses a caller without the admin token, even for an empty query", async () => {
    const { admin, newAccount } = setup();
    const { authorization } = await newAccount();
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization }])
      await expectFailure(
        () => admin.searchAccounts({ query: "" }, { headers }),
        Code.Unauthenticated,
        "invalid_admin_token",
      );
  });
});
