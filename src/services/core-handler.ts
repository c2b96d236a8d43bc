import type { IncomingMessage, ServerResponse } from "node:http";
import { constants, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { Code, ConnectError, createConnectRouter, createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { Logger } from "../logger.ts";
import type { ApiKeyRecord } from "../store/store.ts";
import { requestIdFrom } from "../protocol/request-id.ts";
import { pendingKeyCheck } from "./auth/index.ts";

/** What the core's request handler serves, and how it checks a key from the headers alone. */
export interface CoreHandlerOptions {
  routes: (router: ConnectRouter) => void;
  interceptors: Interceptor[];
  /** The largest request message read: SPEC's body limit plus framing. */
  readMaxBytes: number;
  /** Services (`type.Name`) whose calls need an API key. */
  keyed: ReadonlySet<string>;
  checkKey: (authorization: string | undefined) => Promise<ApiKeyRecord>;
  logger: Logger;
}

/** A request body that fails with `error` at the first read, having read nothing. */
async function* refusedBody(error: unknown): AsyncIterable<Uint8Array> {
  throw error;
}

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
export function createCoreHandler(options: CoreHandlerOptions): (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void {
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
    const uReq = universalRequestFromNodeRequest(req, res, undefined, contextValues);
    const serve = (r: UniversalServerRequest) =>
      handler(r)
        .then((uRes) => universalResponseToNodeResponse(uRes, res))
        .catch((reason: unknown) => {
          if (ConnectError.from(reason).code === Code.Aborted) return;
          options.logger.error("core handler failed", { rpc: `${handler.service.typeName}/${handler.method.name}`, error: String(reason) });
        })
        .finally(() => stopUnreadBody(req));
    if (!options.keyed.has(handler.service.typeName)) {
      void serve(uReq);
      return;
    }
    const authorization = req.headers.authorization;
    const check = options.checkKey(typeof authorization === "string" ? authorization : undefined);
    contextValues.set(pendingKeyCheck, check);
    check.then(
      () => serve(uReq),
      (err: unknown) => {
        // The refusal carries the request id like every other answer of the core.
        const given = req.headers["x-request-id"];
        ConnectError.from(err).metadata.set("x-request-id", requestIdFrom(typeof given === "string" ? given : undefined));
        // No length hint either: Connect would allocate a buffer of the declared size first.
        const header = new Headers(uReq.header);
        header.delete("content-length");
        return serve({ ...uReq, header, body: refusedBody(err) });
      },
    );
  };
}
