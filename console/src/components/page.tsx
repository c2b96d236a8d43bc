/**
 * A page's frame: its `<title>`, its one `<h1>`, and focus moved to that heading after an in-app navigation
 * so keyboard and screen-reader users start reading the new page, not the link they left.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { hasNavigated } from "../router.ts";

/** Sets the document title while the page is shown. */
export function usePageTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Sluice console`;
  }, [title]);
}

/** The page heading and body; `title` is both the `<h1>` and the start of the document title. */
export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  usePageTitle(title);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (hasNavigated()) heading.current?.focus();
  }, []);
  return (
    <>
      <h1 ref={heading} tabIndex={-1}>
        {title}
      </h1>
      {children}
    </>
  );
}
