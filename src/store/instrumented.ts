import { reasonOf } from "../errors/catalogue.ts";
import type { Store } from "./store.ts";

/**
 * The store with every failed operation reported to `onError` (the store-errors metric), by
 * method name and catalogue reason ("service_unavailable" for a timeout or a lost connection,
 * "other" otherwise). Wrapping keeps the stores free of metrics code, and covers every method
 * of every store, those added later included.
 */
export function instrumentStore(store: Store, onError: (op: string, reason: string) => void): Store {
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      let fn = wrapped.get(prop);
      if (fn === undefined) {
        const op = String(prop);
        fn = (...args: unknown[]) => {
          const out: unknown = value.apply(target, args);
          if (!(out instanceof Promise)) return out;
          return out.catch((err: unknown) => {
            onError(op, reasonOf(err) ?? "other");
            throw err;
          });
        };
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}
