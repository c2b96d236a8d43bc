import { Pool } from "undici";
import { createBreaker, type Breaker, type BreakerOptions } from "./breaker.ts";

/** One model server behind a model: its keep-alive connection pool, load and breaker. */
export interface Upstream {
  /** "model#index": how logs name it, never by URL (URLs may carry secrets). */
  label: string;
  pool: Pool;
  /** The base URL's path, such as "/v1". */
  pathPrefix: string;
  outstanding: number;
  breaker: Breaker;
}

export interface UpstreamPoolOptions {
  model: string;
  baseUrls: string[];
  connectTimeoutMs: number;
  /** Connections kept per upstream. */
  connections?: number;
  breaker: BreakerOptions;
}

/**
 * The upstreams of one model with least-outstanding-requests balancing: each call goes to
 * the healthy upstream with the fewest calls in flight (ties broken by order), skipping those
 * already tried for this call and those whose breaker is open.
 */
export function createUpstreamPool(options: UpstreamPoolOptions) {
  const upstreams: Upstream[] = options.baseUrls.map((raw, i) => {
    const url = new URL(raw);
    return {
      label: `${options.model}#${i}`,
      pool: new Pool(url.origin, {
        connections: options.connections ?? 128,
        connect: { timeout: options.connectTimeoutMs },
        keepAliveTimeout: 30_000,
      }),
      pathPrefix: url.pathname.replace(/\/+$/, ""),
      outstanding: 0,
      breaker: createBreaker(options.breaker),
    };
  });
  return {
    upstreams,
    /**
     * The next upstream to try (and whether the call is its breaker's probe), or undefined when every untried one is
     * set aside.
     */
    pick(tried: ReadonlySet<Upstream>): { upstream: Upstream; probe: boolean } | undefined {
      const candidates = upstreams
        .filter((u) => !tried.has(u) && u.breaker.available())
        .sort((a, b) => a.outstanding - b.outstanding);
      for (const upstream of candidates) {
        const grant = upstream.breaker.tryAcquire();
        if (grant) return { upstream, probe: grant === "probe" };
      }
      return undefined;
    },
    /** Whether any upstream could take a call now. */
    anyAvailable: () => upstreams.some((u) => u.breaker.available()),
    close: () => Promise.all(upstreams.map((u) => u.pool.close())),
  };
}
