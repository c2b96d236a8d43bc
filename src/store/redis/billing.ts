import type { Balance, Grant, RateCharge, RateDecision, Store } from "../store.ts";
import { daySpends, periodBounds } from "../days.ts";
import type { RedisClient } from "./client.ts";
import { BILLING_KEYS, type BillingKeyName, CHARGE_RATE_LIMIT, RESERVE } from "./hold-scripts.ts";
import type { createKeys } from "./keys.ts";
import { num, recordOf, usageFields } from "./records.ts";
import { createScript } from "./scripts.ts";
import { BALANCE, KEY_BALANCES, RELEASE, SETTLE } from "./settle-scripts.ts";

/**
 * How long settled and released ids (and spend-cap aborts' charges by id) are kept after a
 * period's last one, so a retried or late command finds its call closed: a stalled server may
 * run queued commands long after they were sent, and operators check ledgers call by call.
 */
const SETTLED_KEEP_SECONDS = 70 * 24 * 3600;

const scripts = {
  chargeRateLimit: createScript(CHARGE_RATE_LIMIT),
  reserve: createScript(RESERVE),
  settle: createScript(SETTLE),
  release: createScript(RELEASE),
  balance: createScript(BALANCE),
  keyBalances: createScript(KEY_BALANCES),
};

/** A `Grant` from the reserve logic's three numbers: granted, held-by-others ms (0 for none), by the key's cap. */
const grantOf = (granted: unknown, held: unknown, byKey: unknown): Grant => ({
  granted: num(granted),
  ...(num(held) > 0 && { heldByOthersMs: num(held) }),
  ...(num(byKey) === 1 && { byKeyCap: true as const }),
});

/** A rate decision from five numbers of a script's answer, starting at `at`. */
const decisionOf = (r: unknown[], at: number): RateDecision => ({
  allowed: num(r[at]) === 1,
  limit: num(r[at + 1]),
  remaining: num(r[at + 2]),
  resetMs: num(r[at + 3]),
  retryAfterMs: num(r[at + 4]),
});

/** A flat field-value list (HGETALL in a script) as numbers by field. */
const numbersByField = (flat: unknown): Map<string, number> => {
  const fields = recordOf(Array.isArray(flat) ? flat.map(String) : null);
  return new Map(Object.entries(fields).map(([field, value]) => [field, num(value)]));
};

/** What the billing methods share with the rest of the Redis store. */
export interface RedisBillingDeps {
  redis: RedisClient;
  keys: ReturnType<typeof createKeys>;
  /** Runs store commands within the store's deadline (503 past it). */
  guarded<T>(operation: () => Promise<T>): Promise<T>;
  /** The "now" a script gets: empty makes it read the server's clock. */
  now(nowMs: number): string | number;
  /** Moves the alerts a settle raised from its account's outbox to the webhook queue; never fails. */
  alertsRaised(accountId: string): Promise<void>;
}

/**
 * The billing methods of the Redis store: each is one Lua script on `BILLING_KEYS`, all in the
 * account's slot, so an admission (request rate, token budget and hold), a settle (the account's
 * and the key's charge, the record, the tokens given back) or a release is one atomic step.
 */
export function createRedisBilling(
  deps: RedisBillingDeps,
): Pick<
  Store,
  "chargeRateLimit" | "extendReservation" | "settle" | "release" | "balance" | "keyBalances" | "spendByDay"
> {
  const { redis, keys, guarded, now } = deps;

  /** `BILLING_KEYS` for a period of an account and, when the step is one key's, that key. */
  const billingKeys = (accountId: string, period: string, apiKeyId = "") => {
    const p = keys.period(accountId, period);
    const named: Record<BillingKeyName, string> = {
      gcra: keys.gcra(accountId, apiKeyId),
      tokens: keys.tokens(accountId),
      account: keys.account(accountId),
      key: keys.apiKey(accountId, apiKeyId),
      spent: p.spent,
      resv: p.reservations,
      exp: p.expiries,
      reserved: p.reserved,
      settled: p.settled,
      released: p.released,
      keySpent: p.keySpent,
      keyReserved: p.keyReserved,
      holders: p.holders,
      usage: keys.usage(accountId),
      partial: p.partial,
      partials: p.partials,
      days: p.days,
      alertsFired: p.alertsFired,
      alertOutbox: keys.alertOutbox(accountId),
    };
    return BILLING_KEYS.map((name) => named[name]);
  };

  return {
    chargeRateLimit: ({ key, nowMs, reserve, tokens }) =>
      guarded(async (): Promise<RateCharge> => {
        const args: Array<string | number> = [
          1000 / key.rateLimitRps,
          key.burst,
          now(nowMs),
          key.id,
          key.tokensPerMinute ?? "",
          tokens ?? "",
        ];
        // Without a hold, only the request rate and the token budget (`BILLING_KEYS`' first two) are
        // touched: every keyed RPC that is not a chat call comes here, so it builds no other name.
        const names = reserve
          ? billingKeys(key.accountId, reserve.period, key.id)
          : [keys.gcra(key.accountId, key.id), keys.tokens(key.accountId)];
        if (reserve) args.push(reserve.reservationId, reserve.minimum, reserve.maximum, reserve.ttlMs);
        const r = (await scripts.chargeRateLimit.run(redis, names, args)) as unknown[];
        const budget = decisionOf(r, 8);
        return {
          ...decisionOf(r, 0),
          ...grantOf(r[5], r[6], r[7]),
          ...(tokens !== undefined && budget.limit >= 0 && { tokens: budget }),
        };
      }),
    extendReservation: (request) =>
      guarded(async () => {
        const r = (await scripts.reserve.run(redis, billingKeys(request.accountId, request.period, request.apiKeyId), [
          request.reservationId,
          request.minimum,
          request.maximum,
          request.ttlMs,
          now(request.nowMs),
          request.apiKeyId ?? "",
        ])) as unknown[];
        return grantOf(r[0], r[1], r[2]);
      }),
    async settle(request) {
      const bounds = periodBounds(request.period);
      const [charged, raised] = await guarded(
        async () =>
          (await scripts.settle.run(redis, billingKeys(request.accountId, request.period, request.apiKeyId), [
            request.reservationId,
            request.chargeUsdMicros,
            SETTLED_KEEP_SECONDS,
            now(request.nowMs),
            bounds.first,
            bounds.last,
            request.apiKeyId ?? "",
            request.usedTokens ?? "",
            (request.alertPercents ?? []).join(","),
            request.accountId,
            request.period,
            ...(request.record ? usageFields(request.record) : []),
          ])) as unknown[],
      );
      // Outside the settle's deadline: the charge is made whatever becomes of the alerts' queueing.
      if (num(raised) > 0) await deps.alertsRaised(request.accountId);
      return num(charged) === -2 ? "released" : "settled";
    },
    release: ({ accountId, period, reservationId, apiKeyId, nowMs }) =>
      guarded(async () => {
        const r = await scripts.release.run(redis, billingKeys(accountId, period, apiKeyId), [
          reservationId,
          SETTLED_KEEP_SECONDS,
          nowMs === undefined ? "" : now(nowMs),
        ]);
        return num(r) === 2 ? "settled" : "released";
      }),
    balance: ({ accountId, period, nowMs }) =>
      guarded(async (): Promise<Balance> => {
        const r = (await scripts.balance.run(redis, billingKeys(accountId, period), [now(nowMs)])) as unknown[];
        return { spentUsdMicros: num(r[0]), reservedUsdMicros: num(r[1]) };
      }),
    keyBalances: ({ accountId, period, nowMs }) =>
      guarded(async () => {
        const r = (await scripts.keyBalances.run(redis, billingKeys(accountId, period), [now(nowMs)])) as unknown[];
        const [spent, reserved] = [numbersByField(r[0]), numbersByField(r[1])];
        const out = new Map<string, Balance>();
        for (const id of new Set([...spent.keys(), ...reserved.keys()]))
          out.set(id, { spentUsdMicros: spent.get(id) ?? 0, reservedUsdMicros: reserved.get(id) ?? 0 });
        return out;
      }),
    spendByDay: ({ accountId, period }) =>
      guarded(async () => {
        const totals = await redis.hgetall(keys.period(accountId, period).days);
        return daySpends(Object.entries(totals).map(([date, spent]) => [date, num(spent)] as const));
      }),
  };
}
