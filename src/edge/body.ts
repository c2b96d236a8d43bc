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
 * Returns undefined when the limit is crossed; the caller answers 413. The request stream
 * is left open (not destroyed), so the refusal can still reach the client.
 */
export function readBodyWithin(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    if (req.destroyed) {
      reject(new Error("the client closed the connection before the body was read"));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        chunks.length = 0;
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => onError(new Error("the client closed the connection mid-body"));
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("close", onClose);
  });
}
