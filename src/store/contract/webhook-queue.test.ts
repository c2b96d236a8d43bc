import { describe, expect, it } from "vitest";
import type { Store } from "../store.ts";
import { PERCENTS } from "./alert-support.ts";
import { account, contractBackends, NOW, PERIOD, withAccount } from "./support.ts";

/**
 * The webhook queue of spend alerts: endpoints, the fan-out of each alert to the endpoints that
 * match its account, leased due deliveries and their attempts, as every dispatcher drives them.
 */
describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  const LEASE = 60_000;
  const endpoint = (id: string, accountId?: string) => ({
    id,
    url: `https://hooks.example/${id}`,
    secret: `whsec_${id}`,
    createTimeMs: NOW,
    ...(accountId !== undefined && { accountId }),
  });
  /** An account with a cap of 1,000 and a settle that asks for alerts. */
  async function alerting() {
    const base = await withAccount(makeStore, 1_000);
    const { store, acc } = base;
    const settle = (id: string, charge: number) =>
      store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId: id,
        chargeUsdMicros: charge,
        nowMs: NOW,
        alertPercents: PERCENTS,
      });
    return { ...base, settle };
  }
  /** An account that has reached 50 % of its cap, with its alert queued and the given endpoints. */
  async function queued(endpointsOf: (accountId: string) => ReturnType<typeof endpoint>[]) {
    const base = await alerting();
    for (const e of endpointsOf(base.acc.id)) await base.store.webhooks.createEndpoint(e);
    await base.settle("c1", 500);
    return base;
  }
  const fanOut = (store: Store, nowMs = NOW) =>
    store.webhooks.fanOut({ consumer: "c", nowMs, max: 100, claimIdleMs: LEASE });
  const claim = (store: Store, nowMs = NOW) => store.webhooks.claimDue({ nowMs, leaseMs: LEASE, max: 100 });

  describe("webhook queue", () => {
    it("stores, lists and deletes endpoints", async () => {
      const store = await makeStore();
      await store.webhooks.createEndpoint(endpoint("whe_1"));
      await store.webhooks.createEndpoint({ ...endpoint("whe_2", "acct"), createTimeMs: NOW + 1 });
      const mine = (await store.webhooks.listEndpoints()).filter((e) => e.id.startsWith("whe_"));
      expect(mine).toEqual([endpoint("whe_1"), { ...endpoint("whe_2", "acct"), createTimeMs: NOW + 1 }]);
      expect(await store.webhooks.deleteEndpoint("whe_1")).toBe(true);
      expect(await store.webhooks.deleteEndpoint("whe_1")).toBe(false);
      expect((await store.webhooks.listEndpoints()).map((e) => e.id)).toEqual(["whe_2"]);
    });

    it("fans an alert out to the endpoints of its account and of every account, once each", async () => {
      const other = account();
      const { store, acc } = await queued((id) => [
        endpoint("all"),
        endpoint("mine", id),
        endpoint("theirs", other.id),
      ]);
      expect(await fanOut(store)).toBe(1);
      expect(await fanOut(store)).toBe(0);
      const due = await claim(store);
      expect(due.map((d) => d.endpoint.id).sort()).toEqual(["all", "mine"]);
      expect(due.every((d) => d.attempts === 0 && d.alert.accountId === acc.id)).toBe(true);
      expect(due[0]?.endpoint.secret).toBe(`whsec_${due[0]?.endpoint.id}`);
      const [delivery] = await store.webhooks.listDeliveries({ endpointId: "mine", pageSize: 10 });
      expect(delivery).toEqual({
        eventId: due[0]?.alert.id,
        endpointId: "mine",
        eventType: "spend.threshold_crossed",
        status: "pending",
        attempts: 0,
        nextAttemptMs: NOW,
        createTimeMs: NOW,
        updateTimeMs: NOW,
      });
      expect(await store.webhooks.listDeliveries({ endpointId: "theirs", pageSize: 10 })).toEqual([]);
    });

    it("leases each due delivery to one claimer, and makes it due again when its lease ends unrecorded", async () => {
      const { store } = await queued(() => [endpoint("e")]);
      await fanOut(store);
      expect(await claim(store)).toHaveLength(1);
      expect(await claim(store)).toEqual([]);
      expect(await store.webhooks.nextDueMs()).toBe(NOW + LEASE);
      expect(await claim(store, NOW + LEASE - 1)).toEqual([]);
      const again = await claim(store, NOW + LEASE);
      expect(again.map((d) => d.attempts)).toEqual([0]);
    });

    it("keeps a failed attempt pending until its retry is due, then records how the delivery ended", async () => {
      const { store } = await queued(() => [endpoint("e")]);
      await fanOut(store);
      const [d] = await claim(store);
      const eventId = d?.alert.id ?? "";
      await store.webhooks.recordAttempt({
        eventId,
        endpointId: "e",
        outcome: "retry",
        nowMs: NOW + 10,
        retryInMs: 5_000,
        httpStatus: 500,
        error: "HTTP 500",
      });
      const list = () => store.webhooks.listDeliveries({ endpointId: "e", pageSize: 10 });
      expect(await list()).toMatchObject([
        { status: "pending", attempts: 1, lastHttpStatus: 500, lastError: "HTTP 500", nextAttemptMs: NOW + 5_010 },
      ]);
      expect(await store.webhooks.nextDueMs()).toBe(NOW + 5_010);
      expect(await claim(store, NOW + 5_009)).toEqual([]);
      expect((await claim(store, NOW + 5_010)).map((x) => x.attempts)).toEqual([1]);
      await store.webhooks.recordAttempt({
        eventId,
        endpointId: "e",
        outcome: "failed",
        nowMs: NOW + 6_000,
        error: "timed out",
      });
      const [failed] = await list();
      expect(failed).toEqual({
        eventId,
        endpointId: "e",
        eventType: "spend.threshold_crossed",
        status: "failed",
        attempts: 2,
        lastError: "timed out",
        createTimeMs: NOW,
        updateTimeMs: NOW + 6_000,
      });
      expect(await store.webhooks.nextDueMs()).toBeUndefined();
      expect(await claim(store, NOW + 100_000)).toEqual([]);
    });

    it("never undoes a delivery with a late attempt, and lists an endpoint's deliveries newest first", async () => {
      const { store, settle } = await queued(() => [endpoint("e")]);
      await fanOut(store);
      const [first] = await claim(store);
      const eventId = first?.alert.id ?? "";
      await store.webhooks.recordAttempt({
        eventId,
        endpointId: "e",
        outcome: "delivered",
        nowMs: NOW,
        httpStatus: 204,
      });
      await store.webhooks.recordAttempt({
        eventId,
        endpointId: "e",
        outcome: "retry",
        nowMs: NOW,
        retryInMs: 1,
        httpStatus: 500,
      });
      await settle("c2", 300);
      await fanOut(store, NOW + 1);
      const list = await store.webhooks.listDeliveries({ endpointId: "e", pageSize: 10 });
      expect(list.map((d) => [d.status, d.attempts, d.lastHttpStatus])).toEqual([
        ["pending", 0, undefined],
        ["delivered", 1, 204],
      ]);
      expect(await store.webhooks.listDeliveries({ endpointId: "e", pageSize: 1 })).toHaveLength(1);
    });

    it("drops the pending deliveries of a deleted endpoint", async () => {
      const { store } = await queued(() => [endpoint("gone"), endpoint("kept")]);
      await fanOut(store);
      await store.webhooks.deleteEndpoint("gone");
      expect((await claim(store)).map((d) => d.endpoint.id)).toEqual(["kept"]);
      expect(await store.webhooks.listDeliveries({ endpointId: "gone", pageSize: 10 })).toEqual([]);
    });

    it("wakes its listeners when a settle queues alerts", async () => {
      const { store, settle } = await alerting();
      let woken = 0;
      const stop = store.webhooks.onAlerts(() => woken++);
      const settled = async (id: string, charge: number) => {
        await settle(id, charge);
        await new Promise((resolve) => setImmediate(resolve));
        return woken;
      };
      expect(await settled("c1", 100)).toBe(0);
      expect(await settled("c2", 500)).toBe(1);
      stop();
      expect(await settled("c3", 400)).toBe(1);
    });
  });
});
