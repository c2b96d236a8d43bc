/**
 * A table's own scroll container: on a phone a wide table scrolls sideways inside it instead of widening the
 * page. It is a labelled, focusable region so keyboard users can scroll it too.
 */
import type { ComponentChildren } from "preact";

/** Wraps a `<table>`; `label` names the scrollable region. */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take focus to scroll by keyboard.
    <section class="table-wrap" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
}
