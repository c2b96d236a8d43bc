/**
 * The token of an `Authorization: Bearer <token>` header, or undefined when there is none.
 * A leaf module: the edge needs it to apply DESIGN's check order before the core is called,
 * and the core needs it to authenticate direct gRPC callers.
 */
export function parseBearer(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/**
 * Request header by which a trusted edge asks the core to check a key without charging its
 * rate limit: the edge must authenticate a chat call before it reads the body, and the call
 * is charged once, later, when the core admits it together with its reservation.
 */
export const EDGE_PREFLIGHT_HEADER = "sluice-edge-preflight";
