import { createTokenizer } from "../engines/tokenizer.ts";
import type { MakeStore } from "../store/contract/support.ts";
import { manualGate, steeredEngine } from "./call-lifecycle.ts";
import { ADMIN, createCoreFixture, type NewAccountOptions } from "./core-fixture.ts";
import { countingEngine, modelsServing } from "./engines.ts";

/** Mid-month, so that the next UTC period starts in exactly 15.5 days. */
export const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
export const MS_TO_NEXT_PERIOD = 15.5 * 86_400_000;
export const TTL = 20_000;
/** The one-message chat of these suites: 7 input tokens at 1 micro; each output token costs 2. */
export const hi = { messages: [{ role: "user", content: "hi" }] };
export const HI_PROMPT = 7;

/**
 * A core for the key-limit suites (key caps, token limits) on a store of the test's, on a clock the
 * test moves: `service-extract` answers 10 tokens of "a" (fewer at max_tokens), `long` 50, and
 * `holder` one token once the test opens its gate. `key` makes a key of one account with limits of
 * its own; the account's cap is `accountCap`.
 */
export async function keyLimitsCore(makeStore: MakeStore, accountCap = 10_000_000n) {
  const clock = { now: NOW };
  const gate = manualGate();
  const holder = steeredEngine(1, gate.arrived);
  const models = modelsServing([
    { name: "service-extract", engine: countingEngine(10) },
    { name: "long", engine: countingEngine(50) },
    { name: "holder", engine: holder.engine },
  ]);
  const fixture = createCoreFixture({
    store: await makeStore(),
    models,
    tokenizer: createTokenizer(),
    now: () => clock.now,
    reservationTtlMs: TTL,
  });
  const first = await fixture.newAccount({ capUsdMicros: accountCap, burst: 1_000, rateLimitRps: 1_000 });
  const { accountId } = first;
  const key = (limits: Omit<NewAccountOptions, "capUsdMicros" | "onboarded"> = {}) =>
    fixture.newKey(accountId, { burst: 1_000, rateLimitRps: 1_000, ...limits });
  /** Admin's view of each key of the account, by id. */
  const adminKeys = async () =>
    new Map((await fixture.admin.listApiKeys({ accountId }, ADMIN)).apiKeys.map((k) => [k.id, k]));
  const balance = async () => {
    const a = await fixture.account(accountId);
    return { spent: Number(a?.spentUsdMicros), reserved: Number(a?.reservedUsdMicros) };
  };
  return { ...fixture, clock, gate, holder, accountId, key, adminKeys, balance };
}
