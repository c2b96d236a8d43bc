/**
 * A small TTL cache that keeps the hot path (key lookups, account reads) off the network.
 * Entries live at most `ttlMs`, so a change made by another process shows within that time
 * even if its invalidation message is lost; local writes and pub/sub invalidations drop
 * entries at once. Misses are cached too (as `undefined`), so a flood of unknown keys costs
 * one lookup per key per TTL. The size is bounded: the oldest entries go first.
 */
export interface TtlCache<V> {
  get(key: string, load: () => Promise<V>): Promise<V>;
  delete(key: string): void;
}

export function createTtlCache<V>(ttlMs: number, maxEntries: number, now: () => number = Date.now): TtlCache<V> {
  const entries = new Map<string, { value: V; expires: number }>();
  return {
    async get(key, load) {
      const hit = entries.get(key);
      if (hit && hit.expires > now()) return hit.value;
      const value = await load();
      entries.delete(key);
      entries.set(key, { value, expires: now() + ttlMs });
      if (entries.size > maxEntries) {
        const oldest = entries.keys().next().value;
        if (oldest !== undefined) entries.delete(oldest);
      }
      return value;
    },
    delete: (key) => void entries.delete(key),
  };
}

/** Cached records are shared: callers get their own copy to change. */
export const copy = <T extends object>(value: T | undefined): T | undefined => (value ? { ...value } : undefined);
