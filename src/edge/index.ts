import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { createContextValues } from "@connectrpc/connect";
import { HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.ts";
import { UNAVAILABLE_RETRY_MS } from "../errors/catalogue.ts";
import { httpErrorFor, retryHeaders } from "../errors/http.ts";
import { parseBearer } from "../protocol/bearer.ts";
import { startAccess } from "./access.ts";
import { handleChat } from "./chat/index.ts";
import { coreCall, rateLimitHeadersOf, type EdgeDeps, type EdgeRequest } from "./context.ts";
import { writeCoreError, writeError, writeJson } from "./respond.ts";
import { requestIdFrom } from "../protocol/request-id.ts";

type Handler = (req: IncomingMessage, res: ServerResponse, deps: EdgeDeps, r: EdgeRequest) => Promise<void>;

/** `GET /v1/me`: the identity probe, translated from `IdentityService.GetCaller`. */
const handleMe: Handler = async (_req, res, deps, r) => {
  let headers: Record<string, string> = { "x-request-id": r.requestId };
  try {
    const me = await deps.clients.identity.getCaller(
      {},
      {
        ...coreCall(r),
        onHeader: (h) => {
          headers = { ...headers, ...rateLimitHeadersOf(h) };
        },
      },
    );
    r.facts.accountId = me.id;
    r.facts.apiKeyId = me.apiKeyId;
    writeJson(res, 200, { id: me.id, email: me.email ?? null }, headers);
  } catch (err) {
    writeCoreError(res, err, deps.links, headers, false);
  }
};

/** `GET /v1/models`: the served models in the OpenAI list shape. */
const handleModels: Handler = async (_req, res, deps, r) => {
  let headers: Record<string, string> = { "x-request-id": r.requestId };
  try {
    const out = await deps.clients.completion.listModels(
      {},
      {
        ...coreCall(r),
        onHeader: (h) => {
          headers = { ...headers, ...rateLimitHeadersOf(h) };
        },
      },
    );
    writeJson(
      res,
      200,
      { object: "list", data: out.models.map((m) => ({ id: m.id, object: "model", created: 0, owned_by: m.ownedBy })) },
      headers,
    );
  } catch (err) {
    writeCoreError(res, err, deps.links, headers, false);
  }
};

/** `/healthz`: the process is up. It never calls the core, so it stays up when the store is down. */
const handleHealthz: Handler = async (_req, res) => writeJson(res, 200, { status: "ok" });

/** `/readyz`: the core's health check (store and engines reachable). */
const handleReadyz: Handler = async (_req, res, deps) => {
  try {
    const out = await deps.clients.health.check({}, { timeoutMs: 2000 });
    if (out.status === HealthCheckResponse_ServingStatus.SERVING) return writeJson(res, 200, { status: "ready" });
  } catch {
    // Reported below as not ready.
  }
  writeJson(res, 503, { status: "unavailable" }, retryHeaders(UNAVAILABLE_RETRY_MS));
};

/**
 * Routes matched by prefix, each a whole subtree handled by one module: the console's pages,
 * the error pages and the public services' Connect calls. `label` is the bounded route name of
 * metrics and access lines.
 */
function subtreeOf(path: string, deps: EdgeDeps): { label: string; methods: string[] } | undefined {
  if (deps.proxy?.handles(path)) return { label: "/sluice.*", methods: ["POST"] };
  if (deps.console && (path === "/console" || path.startsWith("/console/")))
    return { label: "/console", methods: ["GET", "HEAD"] };
  if (deps.docs && (path === "/docs/errors" || path.startsWith("/docs/errors/")))
    return { label: "/docs/errors", methods: ["GET", "HEAD"] };
  return undefined;
}

/** Serves a subtree route once its method is known to be allowed. */
function serveSubtree(
  req: IncomingMessage,
  res: ServerResponse,
  deps: EdgeDeps,
  path: string,
  forwarded: Record<string, string>,
): void {
  if (deps.proxy?.handles(path)) deps.proxy.forward(req, res, forwarded);
  else if (path.startsWith("/docs/")) deps.docs?.serve(res, path, req.method === "HEAD");
  else deps.console?.serve(req, res, path);
}

const ROUTES: Record<string, Partial<Record<string, Handler>>> = {
  "/v1/me": { GET: handleMe },
  "/v1/chat/completions": { POST: handleChat },
  "/v1/models": { GET: handleModels },
  "/healthz": { GET: handleHealthz, HEAD: handleHealthz },
  "/readyz": { GET: handleReadyz, HEAD: handleReadyz },
};

/**
 * The HTTP edge: translates the `/v1` JSON and SSE contract into core RPCs and core errors
 * back into SPEC's envelopes. It holds no business rule; the core decides every outcome.
 */
export function createEdge(deps: EdgeDeps): RequestListener {
  return (req, res) => {
    const given = req.headers["x-request-id"];
    const requestId = requestIdFrom(typeof given === "string" ? given : undefined);
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const routeKey = path.length > 1 ? path.replace(/\/+$/, "") : path;
    const route = ROUTES[routeKey];
    const subtree = route ? undefined : subtreeOf(path, deps);
    const base = { "x-request-id": requestId };
    const label = route ? routeKey : (subtree?.label ?? "other");
    const { facts, propagation } = startAccess(req, res, deps, label, requestId);
    if (subtree) {
      if (subtree.methods.includes(req.method ?? ""))
        return serveSubtree(req, res, deps, path, { ...base, ...propagation });
      return writeError(
        res,
        httpErrorFor("method_not_allowed", deps.links),
        { ...base, allow: subtree.methods.join(", ") },
        true,
      );
    }
    if (!route) return writeError(res, httpErrorFor("not_found", deps.links), base, true);
    const handler = route[req.method ?? "GET"];
    if (!handler)
      return writeError(
        res,
        httpErrorFor("method_not_allowed", deps.links),
        { ...base, allow: Object.keys(route).join(", ") },
        true,
      );
    const authorization = req.headers.authorization;
    const r: EdgeRequest = {
      requestId,
      authorization: parseBearer(authorization) === undefined ? undefined : authorization,
      values: createContextValues(),
      facts,
      propagation,
    };
    handler(req, res, deps, r).catch((err: unknown) => {
      deps.logger.error("edge handler failed", {
        requestId,
        error: err instanceof Error ? (err.stack ?? err.message) : String(err),
      });
      writeCoreError(res, err, deps.links, base, false);
    });
  };
}
