import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ServerReflection, type ServerReflectionResponse } from "../../../gen/grpc/reflection/v1/reflection_pb.ts";
import { ServerReflection as ServerReflectionAlpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { BillingService } from "../../../gen/sluice/billing/v1/billing_service_pb.ts";
import { IdentityService } from "../../../gen/sluice/identity/v1/identity_service_pb.ts";
import { registerReflection } from "./index.ts";

const transport = createRouterTransport((router) => registerReflection(router, [IdentityService, BillingService]));

async function ask(request: Parameters<typeof create>[0]): Promise<ServerReflectionResponse> {
  const client = createClient(ServerReflection, transport);
  async function* one() {
    yield request;
  }
  for await (const res of client.serverReflectionInfo(one())) return res;
  throw new Error("no response");
}
const create = (r: {
  messageRequest: { case: "listServices" | "fileContainingSymbol" | "fileByFilename"; value: string };
}) => r;

describe("reflection", () => {
  it("lists the registered services and itself", async () => {
    const res = await ask({ messageRequest: { case: "listServices", value: "" } });
    expect(res.messageResponse.case).toBe("listServicesResponse");
    const names =
      res.messageResponse.case === "listServicesResponse" ? res.messageResponse.value.service.map((s) => s.name) : [];
    expect(names).toEqual(
      expect.arrayContaining([
        "sluice.identity.v1.IdentityService",
        "sluice.billing.v1.BillingService",
        "grpc.reflection.v1.ServerReflection",
      ]),
    );
  });

  it("returns a method's file with its imports, dependencies first", async () => {
    const res = await ask({
      messageRequest: { case: "fileContainingSymbol", value: "sluice.billing.v1.BillingService.ListUsageRecords" },
    });
    if (res.messageResponse.case !== "fileDescriptorResponse")
      throw new Error(`unexpected ${res.messageResponse.case}`);
    const files = res.messageResponse.value.fileDescriptorProto.map(
      (b) => fromBinary(FileDescriptorProtoSchema, b).name,
    );
    // Billing imports the completion package (EstimateChatCompletion takes its ChatParams), which imports struct.
    expect(files).toEqual([
      "google/protobuf/timestamp.proto",
      "google/protobuf/struct.proto",
      "sluice/completion/v1/completion_service.proto",
      "sluice/billing/v1/billing_service.proto",
    ]);
  });

  it("finds message types and files by name, and says not found otherwise", async () => {
    const byType = await ask({
      messageRequest: { case: "fileContainingSymbol", value: "sluice.identity.v1.GetCallerResponse" },
    });
    expect(byType.messageResponse.case).toBe("fileDescriptorResponse");
    const byName = await ask({
      messageRequest: { case: "fileByFilename", value: "sluice/identity/v1/identity_service.proto" },
    });
    expect(byName.messageResponse.case).toBe("fileDescriptorResponse");
    const missing = await ask({ messageRequest: { case: "fileContainingSymbol", value: "nope.Nothing" } });
    expect(missing.messageResponse.case).toBe("errorResponse");
    if (missing.messageResponse.case === "errorResponse")
      expect(missing.messageResponse.value.errorCode).toBe(Code.NotFound);
  });

  it("serves the v1alpha service that older grpcurl asks for", async () => {
    const client = createClient(ServerReflectionAlpha, transport);
    async function* one() {
      yield { messageRequest: { case: "listServices" as const, value: "" } };
    }
    for await (const res of client.serverReflectionInfo(one())) {
      expect(res.messageResponse.case).toBe("listServicesResponse");
      return;
    }
    throw new Error("no response");
  });
});
