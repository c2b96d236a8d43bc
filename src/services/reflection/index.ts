import { create, createRegistry, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import * as v1 from "../../../gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.ts";

/** A file and everything it imports, dependencies first, each once. */
function withDependencies(file: DescFile, seen = new Set<string>()): DescFile[] {
  if (seen.has(file.name)) return [];
  seen.add(file.name);
  return [...file.dependencies.flatMap((d) => withDependencies(d, seen)), file];
}

type Request = v1.ServerReflectionRequest | v1alpha.ServerReflectionRequest;
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/**
 * Answers reflection requests from the descriptors compiled into `gen/`, so `grpcurl` and
 * `buf curl` work against the core without a copy of the protos.
 */
function createAnswerer(services: DescService[]): (req: Request) => Answer {
  const files = new Map<string, DescFile>();
  for (const s of services) for (const f of withDependencies(s.file)) files.set(f.proto.name, f);
  const registry = createRegistry(...files.values());
  const serialize = (file: DescFile) => ({
    case: "fileDescriptorResponse" as const,
    value: { fileDescriptorProto: withDependencies(file).map((f) => toBinary(FileDescriptorProtoSchema, f.proto)) },
  });
  const notFound = (what: string): Answer => ({
    case: "errorResponse",
    value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
  });
  const fileOfSymbol = (symbol: string): DescFile | undefined => {
    const direct = registry.get(symbol) ?? services.find((s) => s.typeName === symbol);
    if (direct) return direct.file;
    const parent = symbol.slice(0, symbol.lastIndexOf("."));
    return services.find((s) => s.typeName === parent && s.methods.some((m) => `${parent}.${m.name}` === symbol))?.file;
  };
  return (req) => {
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: services.map((s) => ({ name: s.typeName })) } };
      case "fileByFilename": {
        const file = files.get(r.value);
        return file ? serialize(file) : notFound(`file ${r.value}`);
      }
      case "fileContainingSymbol": {
        const file = fileOfSymbol(r.value);
        return file ? serialize(file) : notFound(`symbol ${r.value}`);
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.Unimplemented, errorMessage: `${r.case ?? "empty request"} is not supported` },
        };
    }
  };
}

/** Registers `grpc.reflection.v1` and `v1alpha` (older grpcurl) for the given services. */
export function registerReflection(router: ConnectRouter, services: DescService[]): void {
  const all = [...services, v1.ServerReflection, v1alpha.ServerReflection];
  const answer = createAnswerer(all);
  router.service(v1.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests)
        yield create(v1.ServerReflectionResponseSchema, { originalRequest: req, messageResponse: answer(req) });
    },
  });
  router.service(v1alpha.ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const req of requests)
        yield create(v1alpha.ServerReflectionResponseSchema, { originalRequest: req, messageResponse: answer(req) });
    },
  });
}
