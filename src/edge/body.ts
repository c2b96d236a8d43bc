import type { IncomingMessage } from "node:http";

/** SPEC's request body limit: 32 MiB. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Whether the declared `Content-Length` already exceeds the limit (DESIGN step 2). */
export function declaredTooLarge(req: IncomingMessage, limit = MAX_BODY_BYTES): boolean {
  const declared = req.headers["content-length"];
  return declared !== undefined && Number(declared) > limit;
}

/**
 * Reads a body up to `limit` bytes, counting as it goes, so a chunked body that grows past
 * the limit is refused the moment it does, without holding more than the limit in memory.
 * Returns undefined when the limit is crossed; the caller answers 413.
 */
export async function readBodyWithin(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}
