/**
 * Races each `next()` of an engine against `signal`, with one abort listener for the whole
 * call rather than one added and removed per event (the event-target bookkeeping showed in
 * profiles of streams of many deltas).
 */
export function abortableSteps(signal: AbortSignal): { step<T>(promise: Promise<T>): Promise<T>; dispose(): void } {
  let rejectStep: ((reason: unknown) => void) | undefined;
  const onAbort = () => rejectStep?.(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  return {
    step<T>(promise: Promise<T>): Promise<T> {
      if (signal.aborted) return Promise.reject(signal.reason);
      return new Promise<T>((resolve, reject) => {
        rejectStep = reject;
        promise.then(resolve, reject);
      });
    },
    dispose: () => signal.removeEventListener("abort", onAbort),
  };
}
