/** One load measurement: a number of concurrent clients calling in a loop for a fixed time. */
export interface LoadResult {
  calls: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/**
 * Runs `call` from `concurrency` clients for `seconds` and reports the completed calls per
 * second and the latency quantiles in milliseconds; a call that throws counts as an error.
 */
export async function measure(call: () => Promise<void>, seconds: number, concurrency: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await call();
          latencies.push(performance.now() - t);
        } catch {
          errors += 1;
        }
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? Number.NaN;
  return { calls: latencies.length, rps: latencies.length / seconds, p50: q(0.5), p99: q(0.99), errors };
}

/** Reads a response to its end and fails on anything but 200. */
export async function expectOk(res: Response): Promise<void> {
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(String(res.status));
}
