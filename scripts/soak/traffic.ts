import type { Client } from "@connectrpc/connect";
import type { CompletionService } from "../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { SoakAccount } from "./accounts.ts";
import { MODELS, type SluiceNode } from "./cluster.ts";
import { chatParams, grpcCall, type GrpcLeave } from "./grpc-call.ts";
import { httpCall, type HttpLeave } from "./http-call.ts";
import type { CallResult, Via } from "./outcomes.ts";
import type { Rng } from "./rng.ts";
import { messagesFor } from "./texts.ts";

/** What the traffic needs from the rest of the soak. */
export interface TrafficDeps {
  sluices: SluiceNode[];
  /** One Completion client per Sluice process, by index. */
  grpc: Array<Client<typeof CompletionService>>;
  accounts: SoakAccount[];
  /** Sluice processes down on purpose: new calls avoid them. */
  down: ReadonlySet<number>;
  rng: Rng;
  record: (result: CallResult) => void;
}

/** The soak's own limit on one call; Sluice's timeouts (stalls, stuck readers) are all shorter. */
const CALL_TIMEOUT_MS = 45_000;
const MAX_TOKENS = [1, 2, 8, 16, 64, 256, 1024, 4096, undefined] as const;

function httpLeave(rng: Rng, stream: boolean): HttpLeave {
  const at = rng.weighted(
    stream
      ? {
          none: 46,
          "slow-body": 4,
          "before-body": 5,
          "mid-body": 5,
          "after-send": 5,
          "before-first-byte": 6,
          "after-first-chunk": 8,
          "mid-stream": 10,
          "before-done": 11,
        }
      : {
          none: 66,
          "slow-body": 5,
          "before-body": 6,
          "mid-body": 6,
          "after-send": 7,
          "before-first-byte": 10,
          "after-first-chunk": 0,
          "mid-stream": 0,
          "before-done": 0,
        },
  );
  switch (at) {
    case "slow-body":
    case "before-body":
    case "mid-body":
      return { at, ms: rng.int(5, 400) };
    case "before-first-byte":
      return { at, ms: rng.int(0, 250) };
    case "after-send":
    case "after-first-chunk":
      return { at };
    case "mid-stream":
      return { at, chunks: rng.int(2, 40) };
    case "before-done":
      return { at, on: rng.chance(0.5) ? "finish" : "usage" };
    default:
      return { at: "none" };
  }
}

function grpcLeave(rng: Rng, stream: boolean): GrpcLeave {
  const at = rng.weighted(
    stream
      ? { none: 55, "before-first-event": 10, "after-first-event": 10, "mid-stream": 12, "before-usage": 13 }
      : { none: 80, "before-first-event": 20, "after-first-event": 0, "mid-stream": 0, "before-usage": 0 },
  );
  switch (at) {
    case "before-first-event":
      return { at, ms: rng.int(0, 300) };
    case "mid-stream":
      return { at, deltas: rng.int(2, 40) };
    case "after-first-event":
    case "before-usage":
      return { at };
    default:
      return { at: "none" };
  }
}

/** Picks a live Sluice process (any, when all are down). */
function pickNode(deps: TrafficDeps, rng: Rng): number {
  const up = deps.sluices.map((_, i) => i).filter((i) => !deps.down.has(i));
  return rng.pick(up.length > 0 ? up : deps.sluices.map((_, i) => i));
}

/**
 * One call of the mix: JSON or SSE through an edge (or unary or streamed gRPC straight to a
 * core), either model, n from 1 to 8, varied max_tokens, short or long system messages, on
 * a random account (now and then through the rate-limited key), leaving at a random stage.
 */
async function oneCall(deps: TrafficDeps, rng: Rng): Promise<CallResult> {
  const via: Via = rng.weighted({ "edge-json": 30, "edge-sse": 50, "grpc-unary": 6, "grpc-stream": 14 });
  const account = rng.pick(deps.accounts);
  const apiKey = account.slowKey !== undefined && rng.chance(0.2) ? account.slowKey : account.fastKey;
  const model = rng.chance(0.55) ? MODELS.extract : MODELS.upstream;
  const n = rng.chance(0.6) ? 1 : rng.int(2, 8);
  const maxTokens = rng.pick(MAX_TOKENS);
  const messages = messagesFor(rng, rng.chance(0.3));
  const node = pickNode(deps, rng);
  const base = { via, accountIndex: account.index, model };
  if (via === "grpc-unary" || via === "grpc-stream") {
    const client = deps.grpc[node];
    if (!client) throw new Error(`no gRPC client for node ${node}`);
    const stream = via === "grpc-stream";
    const r = await grpcCall({
      client,
      apiKey,
      stream,
      leave: grpcLeave(rng, stream),
      timeoutMs: CALL_TIMEOUT_MS,
      params: chatParams({ model, messages, n, ...(maxTokens !== undefined && { maxTokens }) }),
    });
    return { ...base, ...r };
  }
  const stream = via === "edge-sse";
  const body = JSON.stringify({
    model,
    messages,
    n,
    ...(stream && { stream: true }),
    ...(maxTokens !== undefined && { max_tokens: maxTokens }),
    ...(rng.chance(0.3) && { temperature: 0.7, seed: rng.int(1, 1000) }),
  });
  const r = await httpCall({
    edgeUrl: deps.sluices[node]?.edgeUrl ?? "",
    apiKey,
    body,
    leave: httpLeave(rng, stream),
    pauseMs: stream && rng.chance(0.06) ? rng.int(500, 8_000) : 0,
    timeoutMs: CALL_TIMEOUT_MS,
  });
  return { ...base, ...r };
}

/**
 * Keeps `concurrency` calls in flight until `stopped()`, then waits for the last ones (each is
 * bounded by the soak's call timeout). Every call ends in exactly one recorded result.
 */
export async function runTraffic(
  deps: TrafficDeps,
  concurrency: number,
  stopped: () => boolean,
  inFlight: { n: number },
): Promise<void> {
  const worker = async (rng: Rng) => {
    while (!stopped()) {
      inFlight.n += 1;
      try {
        deps.record(await oneCall(deps, rng));
      } catch (err) {
        deps.record({
          via: "edge-json",
          accountIndex: -1,
          model: "",
          told: "malformed",
          detail: `soak error: ${String(err).slice(0, 120)}`,
          chunks: 0,
        });
      } finally {
        inFlight.n -= 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, () => worker(deps.rng.fork())));
}
