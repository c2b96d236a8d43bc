/**
 * The signed-in credential: an API key or the admin token. It lives in memory and in `sessionStorage` (so a
 * reload keeps the tab signed in and closing the tab forgets it), never in a URL, a cookie or a log.
 */

/** Which credential was pasted; it decides which RPCs and pages the console offers. */
export type CredentialKind = "api_key" | "admin_token";

/** A signed-in credential and its kind. */
export interface Session {
  credential: string;
  kind: CredentialKind;
}

const STORAGE_KEY = "sluice.console.credential";
let current: Session | undefined;
const listeners = new Set<() => void>();

/** API keys start with this; anything else pasted is taken to be the admin token. */
export const API_KEY_PREFIX = "svc_sk_";

/** Tells an API key from the admin token by the key prefix, the same rule the server's keys follow. */
export function detectKind(credential: string): CredentialKind {
  return credential.startsWith(API_KEY_PREFIX) ? "api_key" : "admin_token";
}

/** A kind in words, for the sign-in hint and the header. */
export function kindLabel(kind: CredentialKind): string {
  return kind === "api_key" ? "API key" : "admin token";
}

/** `sessionStorage`, or nothing where the browser refuses it (then the session lasts until reload). */
function storage(): Storage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined;
  }
}

/** The session, read once from `sessionStorage` and then from memory. */
export function getSession(): Session | undefined {
  if (current) return current;
  const stored = storage()?.getItem(STORAGE_KEY);
  if (stored) current = { credential: stored, kind: detectKind(stored) };
  return current;
}

/** Keeps a verified credential and tells the app, which re-renders for the new kind. */
export function signIn(credential: string): Session {
  current = { credential, kind: detectKind(credential) };
  storage()?.setItem(STORAGE_KEY, credential);
  for (const l of listeners) l();
  return current;
}

/** Forgets the credential everywhere it was kept. */
export function signOut(): void {
  current = undefined;
  storage()?.removeItem(STORAGE_KEY);
  for (const l of listeners) l();
}

/** Calls `listener` after every sign-in and sign-out; returns the unsubscribe function. */
export function onSessionChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
