/**
 * A hook for the one shape every page has: load something, show loading, then the value or the error.
 * A newer load wins over an older one still in flight, and a value loaded for other `deps` is never shown
 * for the new ones, so paging or switching accounts never flashes stale data.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

/** Where a load stands. */
export type AsyncState<T> = { status: "loading" } | { status: "error"; error: unknown } | { status: "ok"; value: T };

const LOADING = { status: "loading" } as const;

/** Whether two dependency lists hold the same values, as hooks compare them. */
function sameDeps(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

/**
 * Runs `load` now and whenever `deps` change; returns its state and a `reload` function. `reload` keeps
 * showing the previous value while the new one loads, so a refresh does not flash the page empty.
 */
export function useAsync<T>(load: () => Promise<T>, deps: readonly unknown[]): [AsyncState<T>, () => void] {
  const [held, setHeld] = useState<{ deps: readonly unknown[]; state: AsyncState<T> }>({ deps, state: LOADING });
  const generation = useRef(0);
  const latest = useRef({ load, deps });
  latest.current = { load, deps };

  const run = useCallback((keepValue: boolean) => {
    const mine = ++generation.current;
    const { load: start, deps: forDeps } = latest.current;
    if (!keepValue) setHeld({ deps: forDeps, state: LOADING });
    start().then(
      (value) => {
        if (mine === generation.current) setHeld({ deps: forDeps, state: { status: "ok", value } });
      },
      (error: unknown) => {
        if (mine === generation.current) setHeld({ deps: forDeps, state: { status: "error", error } });
      },
    );
  }, []);

  // The caller's deps decide when to load again.
  useEffect(() => {
    run(false);
    return () => {
      generation.current++;
    };
  }, deps);

  return [sameDeps(held.deps, deps) ? held.state : LOADING, useCallback(() => run(true), [run])];
}
