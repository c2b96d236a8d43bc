import { InvalidPageTokenError } from "../page-token.ts";

/** Page tokens of a Redis Stream listing: the id of the last entry returned, made opaque. */
export function encodeStreamToken(entryId: string): string {
  return Buffer.from(`s:${entryId}`).toString("base64url");
}

/** The stream id a token names; throws `InvalidPageTokenError` for a foreign token. */
export function decodeStreamToken(token: string): string {
  const match = /^s:(\d{1,20}-\d{1,20})$/.exec(Buffer.from(token, "base64url").toString());
  if (!match?.[1]) throw new InvalidPageTokenError("invalid page token");
  return match[1];
}
