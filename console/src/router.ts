/**
 * Path routing under `/console/` with the History API. Links stay real `<a href>`s (they work opened in a
 * new tab, and the server answers any `/console/...` path with the page); a click on one is turned into a
 * `pushState` so the app swaps the view without a reload.
 */
import { useEffect, useState } from "preact/hooks";

/** Where the server serves the console. */
export const BASE = "/console";

/** A page of the console, parsed from the path. */
export type Route =
  | { name: "home" }
  | { name: "billing" }
  | { name: "usage" }
  | { name: "keys" }
  | { name: "status" }
  | { name: "admin" }
  | { name: "account"; id: string }
  | { name: "not-found" };

/** The console's absolute URL path for an in-app path: `href("/usage")` is `/console/usage`. */
export function href(path: string): string {
  return path === "/" ? `${BASE}/` : BASE + path;
}

/** The in-app path of a location path (`/console/usage/` is `/usage`); `/` for the console's root. */
export function appPath(pathname: string): string {
  if (pathname !== BASE && !pathname.startsWith(`${BASE}/`)) return pathname;
  const rest = pathname.slice(BASE.length).replace(/\/+$/, "");
  return rest === "" ? "/" : rest;
}

const STATIC: Record<string, Route> = {
  "/": { name: "home" },
  "/billing": { name: "billing" },
  "/usage": { name: "usage" },
  "/keys": { name: "keys" },
  "/status": { name: "status" },
  "/admin": { name: "admin" },
};

/** Parses an in-app path; unknown paths are `not-found`. */
export function parseRoute(path: string): Route {
  const known = STATIC[path];
  if (known) return known;
  const account = /^\/admin\/accounts\/([^/]+)$/.exec(path);
  if (account?.[1]) {
    try {
      return { name: "account", id: decodeURIComponent(account[1]) };
    } catch {
      return { name: "not-found" };
    }
  }
  return { name: "not-found" };
}

const CHANGE = "sluice:navigate";
let navigated = false;

/** Whether the user has moved between pages yet; the first page load leaves focus where the browser put it. */
export function hasNavigated(): boolean {
  return navigated;
}

/** Goes to an in-app path without a reload; `replace` for redirects, so Back skips them. */
export function navigate(path: string, replace = false): void {
  const url = href(path);
  navigated = true;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  window.dispatchEvent(new Event(CHANGE));
}

/** The current in-app path, re-rendering the caller on every navigation (links, Back, Forward). */
export function usePath(): string {
  const [path, setPath] = useState(() => appPath(location.pathname));
  useEffect(() => {
    const update = () => {
      navigated = true;
      setPath(appPath(location.pathname));
    };
    window.addEventListener("popstate", update);
    window.addEventListener(CHANGE, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(CHANGE, update);
    };
  }, []);
  return path;
}

/**
 * Document-level click handler: a plain left click on a same-origin link into the console navigates in
 * place. Modified clicks, `target`, `download` and links elsewhere keep the browser's behaviour.
 */
export function interceptLinkClicks(event: MouseEvent): void {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const target = event.target instanceof Element ? event.target.closest("a") : null;
  if (!target || target.target || target.hasAttribute("download")) return;
  const url = new URL(target.href, location.href);
  if (url.origin !== location.origin || appPath(url.pathname) === url.pathname) return;
  // An in-page link (the skip link) is the browser's to follow.
  if (url.pathname === location.pathname && url.hash !== "") return;
  event.preventDefault();
  if (url.pathname !== location.pathname) navigate(appPath(url.pathname));
}
