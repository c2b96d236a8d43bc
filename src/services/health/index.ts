import type { ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "../../../gen/grpc/health/v1/health_pb.ts";

/**
 * The standard gRPC health service. Serving means the store answers and every engine is
 * ready, the same test as the edge's `/readyz`.
 */
export function createHealthService(deps: { ready: () => Promise<void>; pollMs?: number }): ServiceImpl<typeof Health> {
  const status = async () => {
    try {
      await deps.ready();
      return Status.SERVING;
    } catch {
      return Status.NOT_SERVING;
    }
  };
  return {
    async check() {
      return { status: await status() };
    },
    async list() {
      return { statuses: { "": { status: await status() } } };
    },
    async *watch(_req, ctx) {
      let last: Status | undefined;
      while (!ctx.signal.aborted) {
        const now = await status();
        if (now !== last) yield { status: now };
        last = now;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, deps.pollMs ?? 5000);
          ctx.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(t);
              resolve();
            },
            { once: true },
          );
        });
      }
    },
  };
}
