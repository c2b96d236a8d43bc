import { randomUUID } from "node:crypto";

/** What a caller's `x-request-id` may look like to be echoed back (no header injection, bounded). */
const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request id of a call: the caller's `x-request-id` when it is safe to echo, a new one
 * otherwise. A leaf module, so the edge and the core apply the same rule to the same header.
 */
export function requestIdFrom(given: string | null | undefined): string {
  return given && SAFE_ID.test(given) ? given : `req_${randomUUID()}`;
}
