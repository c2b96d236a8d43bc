import { describe, expect, it } from "vitest";
import { sluiceError } from "../errors/catalogue.ts";
import { createMemoryStore } from "./memory/index.ts";
import { instrumentStore } from "./instrumented.ts";
import type { Store } from "./store.ts";

describe("instrumentStore", () => {
  it("reports each failed operation by name and catalogue reason, and passes every outcome through", async () => {
    const memory = createMemoryStore();
    const failing: Store = Object.assign(Object.create(memory) as Store, {
      ping: () => Promise.reject(sluiceError("service_unavailable")),
      getAccount: () => Promise.reject(new Error("boom")),
    });
    const errors: string[] = [];
    const store = instrumentStore(failing, (op, reason) => errors.push(`${op}:${reason}`));
    await expect(store.ping()).rejects.toThrow();
    await expect(store.getAccount("a")).rejects.toThrow("boom");
    expect(await store.hasAccounts()).toBe(false);
    expect(errors).toEqual(["ping:service_unavailable", "getAccount:other"]);
    // One wrapper per method, made once.
    expect(store.ping).toBe(store.ping);
    await memory.close();
  });
});
