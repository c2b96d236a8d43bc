import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it } from "vitest";
import {
  FinishReason,
  StreamChatCompletionResponseSchema,
  type StreamChatCompletionResponse,
} from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import { silentLogger } from "../../logger.ts";
import { streamChat, type StreamDeps } from "./stream.ts";

/** A pause well past the edge's 25 ms hold, so a hold on a timer would have fired. */
const PAUSE_MS = 100;
const pause = () => new Promise((resolve) => setTimeout(resolve, PAUSE_MS));

const base = { id: "chatcmpl-x", model: "m", created: 1n };
const delta = (text: string, last?: boolean) =>
  create(StreamChatCompletionResponseSchema, {
    ...base,
    ...(last !== undefined && { last }),
    event: { case: "delta", value: text },
  });
const finish = () =>
  create(StreamChatCompletionResponseSchema, { ...base, event: { case: "finishReason", value: FinishReason.STOP } });
const usage = () =>
  create(StreamChatCompletionResponseSchema, {
    ...base,
    event: { case: "usage", value: { promptTokens: 1n, completionTokens: 2n, totalTokens: 3n } },
  });

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** Streams `events` (with a pause before the finish) through the edge, and returns the choices of each chunk. */
async function chunksOf(
  events: () => AsyncGenerator<StreamChatCompletionResponse>,
): Promise<Array<{ content?: string; finish: string | null }>> {
  const deps: StreamDeps = {
    keepAliveMs: 60_000,
    writeTimeoutMs: 10_000,
    logger: silentLogger,
    links: { publicUrl: "http://sluice.test" },
  };
  server = createServer((_req, res) => void streamChat(res, deps, events(), {}));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  const text = await (await fetch(`http://127.0.0.1:${port}/`)).text();
  return text
    .split("\n\n")
    .filter((f) => f.startsWith("data: {"))
    .map(
      (f) =>
        JSON.parse(f.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> },
    )
    .filter((c) => c.choices.length > 0)
    .map((c) => ({
      ...(c.choices[0]?.delta.content !== undefined && { content: c.choices[0]?.delta.content }),
      finish: c.choices[0]?.finish_reason ?? null,
    }));
}

describe("finish_reason on the last content chunk", () => {
  it("rides on a delta the engine marks as last, with no timer: however late the finish comes", async () => {
    const chunks = await chunksOf(async function* () {
      yield delta("Hello", false);
      yield delta(" world", true);
      await pause();
      yield finish();
      yield usage();
    });
    expect(chunks).toEqual([
      { content: "Hello", finish: null },
      { content: " world", finish: "stop" },
    ]);
  });

  it("falls back to a short hold when the engine cannot tell: a late finish then comes alone", async () => {
    const chunks = await chunksOf(async function* () {
      yield delta("Hello");
      yield delta(" world");
      await pause();
      yield finish();
      yield usage();
    });
    expect(chunks).toEqual([
      { content: "Hello", finish: null },
      { content: " world", finish: null },
      { content: "", finish: "stop" },
    ]);
  });
});
