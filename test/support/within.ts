/**
 * How long the limits suites wait for the event they expect (a close, a reset, a refusal)
 * before failing: far below node's defaults, which would otherwise pass unnoticed.
 */
export const GUARD_MS = 5000;

/** Rejects with `message` when `promise` has not settled within `ms`. */
export function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} (not within ${ms} ms)`)), ms);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}
