import type { ApiKeyRecord, ReserveRequest } from "../store.ts";
import { apiKey, type MakeStore, NOW, PERIOD, TTL, withAccount } from "./support.ts";

/**
 * An account with keys of its own limits, for the contract files of key caps and token limits,
 * with shorthands that name the key a hold, settle or release belongs to.
 */
export async function withKeys(
  makeStore: MakeStore,
  accountCap: number,
  limits: Record<string, Partial<Pick<ApiKeyRecord, "spendCapUsdMicros" | "tokensPerMinute">>>,
) {
  const base = await withAccount(makeStore, accountCap);
  const { store, acc } = base;
  const keys: Record<string, ApiKeyRecord> = {};
  for (const [name, limit] of Object.entries(limits)) {
    keys[name] = apiKey(acc.id, { rateLimitRps: 1_000_000, burst: 1_000_000, ...limit });
    await store.createApiKey(keys[name]);
  }
  const keyOf = (name: string): ApiKeyRecord => {
    const key = keys[name];
    if (!key) throw new Error(`no key ${name}`);
    return key;
  };
  const ref = (id: string, key: string) => ({
    accountId: acc.id,
    period: PERIOD,
    reservationId: id,
    apiKeyId: keyOf(key).id,
  });
  /** A hold (or its growth) for `key`'s call `id`: the whole `Grant`. */
  const grant = (id: string, key: string, minimum: number, maximum: number, nowMs = NOW) =>
    store.extendReservation({ ...ref(id, key), minimum, maximum, ttlMs: TTL, nowMs });
  const settle = (
    id: string,
    key: string,
    chargeUsdMicros: number,
    extra: { usedTokens?: number; nowMs?: number } = {},
  ) => store.settle({ ...ref(id, key), chargeUsdMicros, nowMs: extra.nowMs ?? NOW, ...extra });
  const release = (id: string, key: string, nowMs = NOW) => store.release({ ...ref(id, key), nowMs });
  /** Each key's money by name (0 and 0 for a key that made nothing). */
  const keyBalance = async (key: string, nowMs = NOW) =>
    (await store.keyBalances({ accountId: acc.id, period: PERIOD, nowMs })).get(keyOf(key).id) ?? {
      spentUsdMicros: 0,
      reservedUsdMicros: 0,
    };
  /** The admission step of a chat call of `key`: request rate, tokens and hold. */
  const admit = (id: string, key: string, minimum: number, maximum: number, tokens?: number, nowMs = NOW) => {
    const reserve: ReserveRequest = { ...ref(id, key), minimum, maximum, ttlMs: TTL };
    return store.chargeRateLimit({ key: keyOf(key), nowMs, reserve, ...(tokens !== undefined && { tokens }) });
  };
  return { ...base, keyOf, grant, settle, release, keyBalance, admit };
}
