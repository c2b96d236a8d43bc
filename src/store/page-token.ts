/**
 * Opaque page tokens. Callers must not build them, so they are base64url, and a token that
 * does not decode is refused as a bad argument instead of silently restarting the listing.
 */
export function encodePageToken(position: number): string {
  return Buffer.from(`p:${position}`).toString("base64url");
}

/** Thrown for a page token this store did not issue. */
export class InvalidPageTokenError extends Error {
  override name = "InvalidPageTokenError";
}

/** The position a token encodes; throws `InvalidPageTokenError` for a foreign token. */
export function decodePageToken(token: string): number {
  const match = /^p:(\d{1,15})$/.exec(Buffer.from(token, "base64url").toString());
  if (!match?.[1]) throw new InvalidPageTokenError("invalid page token");
  return Number(match[1]);
}
