/**
 * The loading, empty and error states every page shows, so they look and read the same everywhere. Errors go
 * in a `role="alert"` region so screen readers announce them as they appear.
 */
import type { ComponentChildren } from "preact";
import { describeError } from "../api.ts";
import type { AsyncState } from "../use-async.ts";

/** A polite "Loading …" line, announced as a status. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** An error, from an RPC failure or a message, in an alert region; `children` may offer a way out. */
export function ErrorAlert({ error, children }: { error: unknown; children?: ComponentChildren }) {
  return (
    <div class="alert" role="alert">
      <p>{typeof error === "string" ? error : describeError(error)}</p>
      {children}
    </div>
  );
}

/** The empty state: what is missing and what to do about it. */
export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/**
 * Renders an `AsyncState`: `Loading` while it loads, `ErrorAlert` (with a retry button) when it failed,
 * else `children` with the value.
 */
export function AsyncView<T>(props: {
  state: AsyncState<T>;
  what: string;
  retry?: () => void;
  children: (value: T) => ComponentChildren;
}) {
  const { state, what, retry, children } = props;
  if (state.status === "loading") return <Loading what={what} />;
  if (state.status === "error") {
    return (
      <ErrorAlert error={state.error}>
        {retry && (
          <button type="button" onClick={retry}>
            Try again
          </button>
        )}
      </ErrorAlert>
    );
  }
  return <>{children(state.value)}</>;
}
