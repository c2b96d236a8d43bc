import { describe, expect, it } from "vitest";
import type { RateLimitedKey, ReservationRef } from "../store.ts";
import { CLOSED_KEEP_MS, createMemoryStore, RATE_SWEEP_MIN } from "./index.ts";

/**
 * The memory store keeps nothing that grows with traffic alone: rate-limit states and closed
 * completion ids are bounded, without forgetting anything a later command still needs.
 */
const NOW = Date.UTC(2026, 10, 15, 12, 0, 0);
const PERIOD = "2026-11";

const key = (id: string, rateLimitRps: number, burst = 1): RateLimitedKey => ({
  id,
  accountId: "acct",
  rateLimitRps,
  burst,
});

async function withAccount(options: Parameters<typeof createMemoryStore>[0] = {}) {
  const store = createMemoryStore(options);
  const accountId = "acct";
  await store.createAccount({
    id: accountId,
    spendCapUsdMicros: 1_000_000_000,
    onboardingComplete: true,
    paymentStatus: "ok",
    subscriptionStatus: "active",
    createTimeMs: NOW,
  });
  const ref = (reservationId: string): ReservationRef => ({ accountId, period: PERIOD, reservationId });
  const take = (reservationId: string, nowMs = NOW) =>
    store.extendReservation({ ...ref(reservationId), minimum: 1, maximum: 10, ttlMs: 60_000, nowMs });
  const settle = (reservationId: string) => store.settle({ ...ref(reservationId), chargeUsdMicros: 10, nowMs: NOW });
  const balance = (nowMs = NOW) => store.balance({ accountId, period: PERIOD, nowMs });
  return { store, ref, take, settle, balance };
}

describe("memory store bounds", () => {
  it("forgets rate-limit states whose time has passed, and keeps every live one", async () => {
    const store = createMemoryStore();
    // One request per 11.6 days: its state stays live for the whole test.
    const slow = key("slow", 1e-6);
    expect((await store.chargeRateLimit({ key: slow, nowMs: NOW })).allowed).toBe(true);
    // 20,000 keys, one a second, each at 10 rps: a key's state is spent before the next comes.
    for (let i = 0; i < 20_000; i++) {
      await store.chargeRateLimit({ key: key(`k${i}`, 10), nowMs: NOW + i * 1000 });
      expect(store.footprint().rateLimitKeys).toBeLessThanOrEqual(RATE_SWEEP_MIN);
    }
    const later = NOW + 20_000_000;
    expect((await store.chargeRateLimit({ key: slow, nowMs: later })).allowed).toBe(false);
    // A forgotten state decides exactly as no state.
    const forgotten = await store.chargeRateLimit({ key: key("k0", 10), nowMs: later });
    expect(forgotten).toEqual(await store.chargeRateLimit({ key: key("never-seen", 10), nowMs: later }));
  });

  it("keeps at most twice the live rate-limit states between sweeps", async () => {
    const store = createMemoryStore();
    const live = 5_000;
    for (let i = 0; i < live; i++) await store.chargeRateLimit({ key: key(`live${i}`, 1e-6), nowMs: NOW });
    expect(store.footprint().rateLimitKeys).toBe(live);
    for (let i = 0; i < 30_000; i++) {
      await store.chargeRateLimit({ key: key(`k${i}`, 10), nowMs: NOW + (i + 1) * 1000 });
      expect(store.footprint().rateLimitKeys).toBeLessThanOrEqual(2 * live);
    }
    for (let i = 0; i < live; i++) {
      const again = await store.chargeRateLimit({ key: key(`live${i}`, 1e-6), nowMs: NOW + 31_000_000 });
      expect(again.allowed).toBe(false);
    }
  });

  it("forgets a closed id once it is older than a command for it can be", async () => {
    let now = NOW;
    const { store, take, settle } = await withAccount({ clock: () => now });
    // 3,000 calls, one closed a second: only the last CLOSED_KEEP_MS of them are kept.
    for (let i = 0; i < 3_000; i++) {
      await take(`c${i}`);
      await settle(`c${i}`);
      now += 1000;
      expect(store.footprint().closedIds).toBeLessThanOrEqual(CLOSED_KEEP_MS / 1000 + 1);
    }
    expect(store.footprint().closedIds).toBeGreaterThan(CLOSED_KEEP_MS / 1000 - 10);
  });

  it("still answers for a closed id within the keep time: settled stays settled, released stays released", async () => {
    let now = NOW;
    const { store, ref, take, settle, balance } = await withAccount({ clock: () => now });
    await take("billed");
    await settle("billed");
    await take("dropped");
    expect(await store.release(ref("dropped"))).toBe("released");
    now += CLOSED_KEEP_MS - 1000;
    expect(await store.release(ref("billed"))).toBe("settled");
    expect(await settle("dropped")).toBe("released");
    expect(await take("dropped", NOW + 1)).toEqual({ granted: 0 });
    expect(await balance()).toEqual({ spentUsdMicros: 10, reservedUsdMicros: 0 });
    // Past the keep time, the next close sweeps both away.
    now += 2000;
    await store.release(ref("another"));
    expect(store.footprint().closedIds).toBe(1);
  });

  it("keeps at most maxClosedIds, the oldest forgotten first", async () => {
    const { store, ref, take, settle } = await withAccount({ clock: () => NOW, maxClosedIds: 100 });
    for (let i = 0; i < 1_000; i++) {
      await take(`c${i}`);
      await settle(`c${i}`);
    }
    expect(store.footprint().closedIds).toBe(100);
    expect(await store.release(ref("c999"))).toBe("settled");
    expect(await store.release(ref("c900"))).toBe("settled");
  });
});
