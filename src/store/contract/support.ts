import { randomUUID } from "node:crypto";
import { redisBackends } from "../../../test/support/redis-backends.ts";
import { createMemoryStore } from "../memory/index.ts";
import { connectRedis } from "../redis/client.ts";
import { createRedisStore } from "../redis/index.ts";
import type {
  AccountRecord,
  ApiKeyRecord,
  ExtendReservationRequest,
  ReserveRequest,
  Store,
  UsageRecordRow,
} from "../store.ts";

/**
 * The one contract every Store backend passes, shared by the files of `src/store/contract`.
 * Each file runs its cases on every backend, with servers of its own.
 */

export const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
export const PERIOD = "2026-11";
export const TTL = 30_000;

/** Makes a fresh, empty store (it may be async, e.g. a Redis store on a spawned server). */
export type MakeStore = () => Store | Promise<Store>;

/**
 * The backends, by name: memory, a Redis server and a three-primary Cluster (where any script
 * touching keys of two slots would fail). Add a backend by appending a factory. The Redis ones
 * share one spawned server (or Cluster) per test file, each store on a fresh key prefix so it
 * starts empty, and are closed after the file.
 */
export function contractBackends(): [string, MakeStore][] {
  const { backends, stores } = redisBackends();
  const onRedis = async (url: string) => {
    const store = createRedisStore({
      redis: await connectRedis(url),
      subscriber: await connectRedis(url),
      prefix: `t${randomUUID().slice(0, 8)}`,
      serverTime: false,
    });
    stores.push(store);
    return store;
  };
  return [
    ["memory", () => createMemoryStore()],
    ...backends.map(([name, urlOf]): [string, MakeStore] => [name, async () => onRedis(await urlOf())]),
  ];
}

export function account(overrides: Partial<AccountRecord> = {}): AccountRecord {
  return {
    id: randomUUID(),
    onboardingComplete: true,
    paymentStatus: "ok",
    subscriptionStatus: "active",
    createTimeMs: NOW,
    ...overrides,
  };
}

export function apiKey(accountId: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const id = `key_${randomUUID().replaceAll("-", "")}`;
  return {
    id,
    accountId,
    prefix: "svc_sk_abcdef",
    hash: `${id}-hash`,
    rateLimitRps: 10,
    burst: 10,
    revoked: false,
    createTimeMs: NOW,
    ...overrides,
  };
}

/** A key as the rate limiter sees it. */
export function limited(id: string, rateLimitRps: number, burst: number) {
  return { id, accountId: `acct-of-${id}`, rateLimitRps, burst };
}

export function record(accountId: string, id: string, createTimeMs = NOW): UsageRecordRow {
  return {
    id,
    accountId,
    apiKeyId: "key_1",
    model: "service-extract",
    promptTokens: 7,
    completionTokens: 3,
    costUsdMicros: 13,
    createTimeMs,
  };
}

/** A fresh store holding one account with the given cap, and shorthands for its reservations. */
export async function withAccount(makeStore: MakeStore, capUsdMicros: number | null = 1_000) {
  const store = await makeStore();
  const acc = account(capUsdMicros === null ? {} : { spendCapUsdMicros: capUsdMicros });
  await store.createAccount(acc);
  /** A reservation of this account in `PERIOD`, for `extendReservation` or an admission. */
  const reserve = (reservationId: string, minimum: number, maximum: number): ReserveRequest => ({
    accountId: acc.id,
    period: PERIOD,
    reservationId,
    minimum,
    maximum,
    ttlMs: TTL,
  });
  /** The whole answer of `extendReservation`, refusals' `heldByOthersMs` included. */
  const grant = (
    reservationId: string,
    minimum: number,
    maximum: number,
    extra: Partial<ExtendReservationRequest> = {},
  ) => store.extendReservation({ ...reserve(reservationId, minimum, maximum), nowMs: NOW, ...extra });
  /** The micros `extendReservation` granted. */
  const extend = async (...args: Parameters<typeof grant>) => (await grant(...args)).granted;
  const balance = (nowMs = NOW, period = PERIOD) => store.balance({ accountId: acc.id, period, nowMs });
  const settle = (reservationId: string, chargeUsdMicros: number, withRecord = true, nowMs = NOW) =>
    store.settle({
      accountId: acc.id,
      period: PERIOD,
      reservationId,
      chargeUsdMicros,
      nowMs,
      ...(withRecord && { record: { ...record(acc.id, reservationId), costUsdMicros: chargeUsdMicros } }),
    });
  const release = (reservationId: string) => store.release({ accountId: acc.id, period: PERIOD, reservationId });
  return { store, acc, reserve, grant, extend, balance, settle, release };
}
