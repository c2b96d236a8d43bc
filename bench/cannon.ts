/**
 * Load through autocannon's programmatic API: a fixed number of keep-alive connections, one
 * request in flight on each, for a fixed time. autocannon reads every response to its end
 * (an SSE stream counts once its terminating chunk arrived), and its `response` event gives
 * each response time in fractional milliseconds; the quantiles are computed from those
 * because autocannon's own histogram rounds to whole milliseconds, too coarse for a 0.2 ms
 * target.
 */
import autocannon from "autocannon";

/** One request shape to send. */
export interface Target {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Whether a 2xx body is a complete, successful answer (an SSE stream can fail after its 200). */
  verify?: (body: string) => boolean;
}

/** One measured window. Latencies in milliseconds. */
export interface LoadFigures {
  connections: number;
  seconds: number;
  /** 2xx responses read to the end whose body passed `verify`. */
  completed: number;
  rps: number;
  p50: number;
  p99: number;
  /** Connection errors and timeouts (autocannon's `errors`, timeouts included). */
  errors: number;
  timeouts: number;
  non2xx: number;
  /** 2xx answers whose body failed `verify` (counted in neither `completed` nor the quantiles' meaning). */
  badBodies: number;
  /** Status code counts, to tell a 429 from a 503 when something went wrong. */
  statusCodes: Record<string, number>;
}

function quantile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN;
}

/** Runs one autocannon window against `target`; the figures count only what finished inside it. */
export function load(target: Target, connections: number, seconds: number): Promise<LoadFigures> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        method: "POST",
        headers: target.headers,
        body: target.body,
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
        ...(target.verify !== undefined && {
          verifyBody: (body: unknown) =>
            target.verify?.(Buffer.isBuffer(body) ? body.toString("utf8") : String(body)) === true,
        }),
      },
      (err, result) => {
        if (err !== null && err !== undefined) {
          reject(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        const sorted = Float64Array.from(latencies).sort();
        const elapsed = result.duration > 0 ? result.duration : seconds;
        const statusCodes: Record<string, number> = {};
        for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stat.count ?? 0;
        const completed = Math.max(0, sorted.length - result.mismatches);
        resolve({
          connections,
          seconds: elapsed,
          completed,
          rps: completed / elapsed,
          p50: quantile(sorted, 0.5),
          p99: quantile(sorted, 0.99),
          errors: result.errors,
          timeouts: result.timeouts,
          non2xx: result.non2xx,
          badBodies: result.mismatches,
          statusCodes,
        });
      },
    );
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
    });
  });
}
