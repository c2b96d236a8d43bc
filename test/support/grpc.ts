import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { loadSync, type MethodDefinition, type PackageDefinition } from "@grpc/proto-loader";
import {
  ErrorInfoSchema,
  RetryInfoSchema,
  type ErrorInfo,
  type RetryInfo,
} from "../../gen/google/rpc/error_details_pb.ts";
import { StatusSchema } from "../../gen/google/rpc/status_pb.ts";

/**
 * A polyglot-style gRPC client: the service descriptions are read from `proto/` at run time
 * with @grpc/proto-loader (as a team generating their own stubs would), never from `gen/`,
 * and calls go through @grpc/grpc-js over h2c.
 */
const PROTO_ROOT = new URL("../../proto/", import.meta.url).pathname;

/** Loads the public protos with proto3 JSON-ish conventions (camelCase, int64 as string). */
export function loadProtos(): PackageDefinition {
  return loadSync(["sluice/identity/v1/identity_service.proto", "sluice/completion/v1/completion_service.proto"], {
    includeDirs: [PROTO_ROOT],
    longs: String,
    enums: String,
    oneofs: true,
    defaults: false,
  });
}

/** One RPC's definition: path and (de)serializers. */
export function methodOf(
  definition: PackageDefinition,
  service: string,
  method: string,
): MethodDefinition<object, object> {
  const svc = definition[service];
  if (!svc || "format" in svc) throw new Error(`no service ${service}`);
  const m = svc[method];
  if (!m || typeof m.path !== "string") throw new Error(`no method ${service}/${method}`);
  return m;
}

/** A grpc-js client for the core's address (an http:// URL; h2c, insecure). */
export function grpcClient(coreUrl: string): grpc.Client {
  return new grpc.Client(new URL(coreUrl).host, grpc.credentials.createInsecure());
}

/** Metadata with the given entries. */
export function metadataOf(entries: Record<string, string>): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) md.set(k, v);
  return md;
}

/** A unary call; resolves with the response and the response headers, rejects with the ServiceError. */
export function unary(
  client: grpc.Client,
  method: MethodDefinition<object, object>,
  request: object,
  metadata: grpc.Metadata,
): Promise<{ response: object; headers: grpc.Metadata }> {
  return new Promise((resolve, reject) => {
    let headers = new grpc.Metadata();
    const call = client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      metadata,
      { deadline: Date.now() + 10_000 },
      (err, response) => {
        if (err) return reject(err);
        if (!response) return reject(new Error("no response"));
        resolve({ response, headers });
      },
    );
    call.on("metadata", (md: grpc.Metadata) => {
      headers = md;
    });
  });
}

/** A server-streaming call: every message received, then the final status or error. */
export function serverStream(
  client: grpc.Client,
  method: MethodDefinition<object, object>,
  request: object,
  metadata: grpc.Metadata,
): Promise<{ messages: object[]; error: grpc.ServiceError | undefined }> {
  return new Promise((resolve) => {
    const messages: object[] = [];
    let error: grpc.ServiceError | undefined;
    const call = client.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      metadata,
      { deadline: Date.now() + 10_000 },
    );
    call.on("data", (m: object) => messages.push(m));
    call.on("error", (err: grpc.ServiceError) => {
      error = err;
    });
    call.on("status", () => setImmediate(() => resolve({ messages, error })));
  });
}

/** Whether a value is a grpc-js ServiceError. */
export function isServiceError(value: unknown): value is grpc.ServiceError {
  return (
    value instanceof Error &&
    typeof (value as { code?: unknown }).code === "number" &&
    (value as { metadata?: unknown }).metadata instanceof grpc.Metadata
  );
}

/** The google.rpc.Status of a failed call, decoded from its `grpc-status-details-bin` trailer. */
export function richStatusOf(err: grpc.ServiceError): {
  code: number;
  message: string;
  errorInfos: ErrorInfo[];
  retryInfos: RetryInfo[];
} {
  const [bin] = err.metadata.get("grpc-status-details-bin");
  if (!(bin instanceof Buffer)) throw new Error("no grpc-status-details-bin trailer");
  const status = fromBinary(StatusSchema, bin);
  const errorInfos: ErrorInfo[] = [];
  const retryInfos: RetryInfo[] = [];
  for (const detail of status.details) {
    const info = anyUnpack(detail, ErrorInfoSchema);
    if (info) errorInfos.push(info);
    const retry = anyUnpack(detail, RetryInfoSchema);
    if (retry) retryInfos.push(retry);
  }
  return { code: status.code, message: status.message, errorInfos, retryInfos };
}
