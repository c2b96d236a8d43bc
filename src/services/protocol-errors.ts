import { Code } from "@connectrpc/connect";
import type { UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromString } from "@connectrpc/connect/protocol-connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.ts";
import type { Reason } from "../errors/catalogue.ts";

/**
 * Connect refuses some requests itself, before any interceptor or handler runs: a body it
 * cannot decode, a message above the read limit. Those errors carry no `ErrorInfo`. This
 * module finds them and names their catalogue reason, so the core can answer them as it
 * answers everything else (AIP-193), whatever the protocol.
 */

/** Connect reports a binary message that does not decode as an internal error; it is the caller's. */
const UNDECODABLE = /^(parse binary|cannot decode|premature EOF|invalid wire type|illegal tag)/;

/** The reason of an error Connect raised on its own, from its code and message and, for JSON, the request body. */
export function reasonOfRefusal(code: Code, message: string, jsonBody: Uint8Array | undefined): Reason | undefined {
  if (code === Code.ResourceExhausted) return "request_too_large";
  if (code === Code.Internal && UNDECODABLE.test(message)) return "invalid_request_body";
  if (code !== Code.InvalidArgument) return undefined;
  if (jsonBody === undefined) return "invalid_request_body";
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(jsonBody));
  } catch {
    return "invalid_json_body";
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? "invalid_request_body"
    : "body_must_be_object";
}

/** What `refusalOf` found: Connect's own refusal (its code), and the response to send otherwise. */
export interface Inspected {
  /** The code and message of a refusal Connect made on its own (no ErrorInfo), if it is one. */
  refusal: { code: Code; message: string } | undefined;
  /** The response, whole again (its body was read to inspect it). */
  res: UniversalServerResponse;
}

/** Reads a (small) response body whole. */
async function readAll(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * Tells a refusal Connect made on its own (a Connect unary error body, or a gRPC trailers-only
 * status, without an ErrorInfo) from every other response, which is returned as it was.
 */
export async function refusalOf(res: UniversalServerResponse): Promise<Inspected> {
  const grpcStatus = res.header?.get("grpc-status");
  if (grpcStatus !== null && grpcStatus !== undefined) {
    const refused = grpcStatus !== "0" && !res.header?.has("grpc-status-details-bin");
    const message = decodeURIComponent(res.header?.get("grpc-message") ?? "");
    return { refusal: refused ? { code: Number(grpcStatus) as Code, message } : undefined, res };
  }
  if (res.status === 200 || !res.header?.get("content-type")?.startsWith("application/json") || !res.body)
    return { refusal: undefined, res };
  const bytes = await readAll(res.body);
  const whole = {
    ...res,
    body: (async function* () {
      yield bytes;
    })(),
  };
  try {
    const error = JSON.parse(new TextDecoder().decode(bytes)) as {
      code?: unknown;
      message?: unknown;
      details?: Array<{ type?: unknown }>;
    };
    if (error.details?.some((d) => d.type === ErrorInfoSchema.typeName)) return { refusal: undefined, res: whole };
    const code = typeof error.code === "string" ? codeFromString(error.code) : undefined;
    const message = typeof error.message === "string" ? error.message : "";
    return { refusal: code === undefined ? undefined : { code, message }, res: whole };
  } catch {
    return { refusal: undefined, res: whole };
  }
}
