import { describe, expect, it } from "vitest";
import { InvalidPageTokenError } from "../page-token.ts";
import type { Store } from "../store.ts";
import { contractBackends, NOW, PERIOD, record, withAccount } from "./support.ts";

describe.each(contractBackends())("Store contract: %s", (_name, makeStore) => {
  describe("usage records", () => {
    async function withRecords(count: number) {
      const ctx = await withAccount(makeStore, 1_000_000);
      for (let i = 1; i <= count; i++) {
        await ctx.store.settle({
          accountId: ctx.acc.id,
          period: PERIOD,
          reservationId: `u${i}`,
          chargeUsdMicros: 13,
          nowMs: NOW + i,
          record: record(ctx.acc.id, `u${i}`, NOW + i),
        });
      }
      return ctx;
    }

    const page = (store: Store, accountId: string, pageSize: number, pageToken = "") =>
      store.listUsageRecords({ accountId, pageSize, pageToken });

    async function walk(store: Store, accountId: string, pageSize: number): Promise<string[][]> {
      const pages: string[][] = [];
      let token = "";
      do {
        const next = await page(store, accountId, pageSize, token);
        pages.push(next.records.map((r) => r.id));
        token = next.nextPageToken;
      } while (token && pages.length < 100);
      return pages;
    }

    it("lists newest first and walks every record exactly once", async () => {
      const { store, acc } = await withRecords(7);
      expect(await walk(store, acc.id, 3)).toEqual([["u7", "u6", "u5"], ["u4", "u3", "u2"], ["u1"]]);
      expect(await walk(store, acc.id, 7)).toEqual([["u7", "u6", "u5", "u4", "u3", "u2", "u1"]]);
      expect(await walk(store, acc.id, 100)).toEqual([["u7", "u6", "u5", "u4", "u3", "u2", "u1"]]);
      const [first] = (await page(store, acc.id, 1)).records;
      expect(first).toEqual(record(acc.id, "u7", NOW + 7));
    });

    it("neither skips nor repeats when a record is added mid-walk", async () => {
      const { store, acc } = await withRecords(5);
      const page1 = await page(store, acc.id, 2);
      await store.settle({
        accountId: acc.id,
        period: PERIOD,
        reservationId: "u6",
        chargeUsdMicros: 13,
        nowMs: NOW + 6,
        record: record(acc.id, "u6", NOW + 6),
      });
      const page2 = await page(store, acc.id, 2, page1.nextPageToken);
      const page3 = await page(store, acc.id, 2, page2.nextPageToken);
      expect([...page1.records, ...page2.records, ...page3.records].map((r) => r.id)).toEqual([
        "u5",
        "u4",
        "u3",
        "u2",
        "u1",
      ]);
      expect(page3.nextPageToken).toBe("");
    });

    it("returns an empty last page for an account without records", async () => {
      const { store, acc } = await withAccount(makeStore);
      expect(await page(store, acc.id, 10)).toEqual({ records: [], nextPageToken: "" });
    });

    it("refuses a page token it did not issue", async () => {
      const { store, acc } = await withRecords(3);
      for (const token of [
        "nope",
        "!!!",
        Buffer.from("p:abc").toString("base64url"),
        Buffer.from("x:1").toString("base64url"),
      ]) {
        await expect(page(store, acc.id, 10, token)).rejects.toBeInstanceOf(InvalidPageTokenError);
      }
    });
  });
});
