import type { IncomingMessage, ServerResponse } from "node:http";
import { constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import type { UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../logger.ts";
import { sluiceError } from "../errors/catalogue.ts";
import { requestIdFrom } from "../protocol/request-id.ts";
import { keyCheck } from "./auth/index.ts";
import { rateLimitHeaders } from "./auth/rate-limit-headers.ts";
import type { Core } from "./core.ts";
import { reasonOfRefusal, refusalOf } from "./protocol-errors.ts";

/**
 * What the core's request handler serves (the core's routes and interceptors), how it checks a
 * key from the headers alone, and how it charges the rate limit of a call refused before its
 * handler ran (a body that does not decode), so that the caller sees DESIGN's order: 429
 * before 400.
 */
export type CoreHandlerOptions = Pick<Core, "routes" | "interceptors" | "keyed" | "checkKey" | "chargeRateLimit"> & {
  /** The largest request message read: SPEC's body limit plus framing. */
  readMaxBytes: number;
  logger: Logger;
};

/** A request body that fails with `error` at the first read, having read nothing. */
function refusedBody(error: unknown): AsyncIterable<Uint8Array> {
  return { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error) }) };
}

/** Passes a body through, keeping its chunks in `kept` (a Connect JSON body, to classify a refusal). */
async function* keeping(body: AsyncIterable<Uint8Array>, kept: Uint8Array[]): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    kept.push(chunk);
    yield chunk;
  }
}

const isByteStream = (body: unknown): body is AsyncIterable<Uint8Array> =>
  typeof body === "object" && body !== null && Symbol.asyncIterator in body;

/** Tells an HTTP/2 client that sent more than was read to stop: the answer is complete. */
function stopUnreadBody(req: IncomingMessage | Http2ServerRequest): void {
  if (req.readableEnded || !("stream" in req)) return;
  if (!req.stream.closed) req.stream.close(constants.NGHTTP2_NO_ERROR);
}

/**
 * The core's node request handler: Connect's routing (gRPC, Connect and gRPC-Web), with one
 * rule Connect alone cannot give. For keyed services the API key is checked from the headers
 * before a byte of the body is read, so an unauthenticated caller cannot make the core buffer
 * and decode a 32 MiB message (DESIGN: "the core checks the bearer from the headers before it
 * decodes a message"). A refused call gets its error in the caller's protocol, and its unread
 * body is refused with RST_STREAM(NO_ERROR).
 */
export function createCoreHandler(
  options: CoreHandlerOptions,
): (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void {
  const router = createConnectRouter({ interceptors: options.interceptors, readMaxBytes: options.readMaxBytes });
  options.routes(router);
  const paths = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req, res) => {
    const handler = paths.get(req.url?.split("?", 2)[0] ?? "");
    if (!handler) {
      res.statusCode = 404;
      res.end();
      return;
    }
    const contextValues = createContextValues();
    const authorization = req.headers.authorization;
    // Keyed services: the key is checked from the headers, before any of the body is read.
    const check = options.keyed.has(handler.service.typeName)
      ? options.checkKey(typeof authorization === "string" ? authorization : undefined)
      : undefined;
    check?.catch(() => undefined);
    const given = universalRequestFromNodeRequest(req, res, undefined, contextValues);
    // A Connect JSON body is kept while the call runs, so a refusal of it can be classified.
    const kept: Uint8Array[] | undefined = String(req.headers["content-type"] ?? "").startsWith("application/json")
      ? []
      : undefined;
    const uReq = kept && isByteStream(given.body) ? { ...given, body: keeping(given.body, kept) } : given;
    /** The request as one that Connect answers with `error`, in its protocol, reading nothing more of its body. */
    const refusing = (error: unknown): UniversalServerRequest => {
      const header = new Headers(uReq.header);
      header.delete("content-length"); // else Connect allocates a buffer of the declared size first
      return { ...uReq, header, body: refusedBody(error) };
    };
    /** The catalogue error for a refusal Connect made on its own: its reason, after the rate limit. */
    const errorFor = async (refusal: { code: Code; message: string }) => {
      const reason = reasonOfRefusal(refusal.code, refusal.message, kept ? Buffer.concat(kept) : undefined);
      if (reason === undefined) return undefined;
      const key = await check?.catch(() => undefined);
      if (!key) return sluiceError(reason);
      const decision = await options.chargeRateLimit(key);
      const headers = rateLimitHeaders(decision);
      return decision.allowed
        ? sluiceError(reason, { headers })
        : sluiceError("api_key_rate_limited", { retryAfterMs: decision.retryAfterMs, headers });
    };
    /** A refusal Connect made on its own gets its catalogue reason, in the caller's protocol. */
    const named = async (r: UniversalServerResponse): Promise<UniversalServerResponse> => {
      const { refusal, res: whole } = await refusalOf(r);
      if (refusal !== undefined) {
        const error = await errorFor(refusal);
        return error ? handler(refusing(error)) : whole;
      }
      // gRPC puts a refusal in the trailers, known only once the body has been sent.
      const trailer = whole.trailer;
      if (!trailer || !whole.body || !String(whole.header?.get("content-type") ?? "").startsWith("application/grpc"))
        return whole;
      const body = whole.body;
      const checked = async function* () {
        yield* body;
        const status = trailer.get("grpc-status");
        if (status === null || status === "0" || trailer.has("grpc-status-details-bin")) return;
        const error = await errorFor({
          code: Number(status) as Code,
          message: decodeURIComponent(trailer.get("grpc-message") ?? ""),
        });
        if (error) setTrailerStatus(trailer, error);
      };
      return { ...whole, body: checked() };
    };
    const serve = (r: UniversalServerRequest) =>
      handler(r)
        .then(named)
        .then((uRes) => universalResponseToNodeResponse(uRes, res))
        .catch((reason: unknown) => {
          if (ConnectError.from(reason).code === Code.Aborted) return;
          options.logger.error("core handler failed", {
            rpc: `${handler.service.typeName}/${handler.method.name}`,
            error: String(reason),
          });
        })
        .finally(() => stopUnreadBody(req));
    if (!check) {
      void serve(uReq);
      return;
    }
    contextValues.set(keyCheck, {
      authorization: typeof authorization === "string" ? authorization : null,
      key: check,
    });
    check.then(
      () => serve(uReq),
      (err: unknown) => {
        // The refusal carries the request id like every other answer of the core.
        const id = req.headers["x-request-id"];
        ConnectError.from(err).metadata.set("x-request-id", requestIdFrom(typeof id === "string" ? id : undefined));
        return serve(refusing(err));
      },
    );
  };
}
