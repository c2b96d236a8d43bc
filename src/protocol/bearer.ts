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
