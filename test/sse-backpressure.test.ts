import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FinishReason } from "../gen/sluice/completion/v1/completion_service_pb.ts";
import type { Engine, EngineEvent } from "../src/engines/engine.ts";
import { eventually } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { registryWith } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

/**
 * A reader that never reads (issue 7, defect 5): the stream must pause its call when the
 * socket is full, not buffer the answer in memory, and end it unbilled once the reader has
 * been stuck past the write timeout, releasing its hold.
 */

/** Deltas of 64 KiB: the whole answer (256 MiB) cannot hide in socket buffers. */
const DELTA_TEXT = "x".repeat(64 * 1024);
const DELTAS = 4096;

function hugeEngine(): Engine & { pulled: () => number } {
  let pulled = 0;
  return {
    pulled: () => pulled,
    async *generate(_request, signal): AsyncGenerator<EngineEvent> {
      for (let i = 0; i < DELTAS && !signal.aborted; i++) {
        pulled++;
        yield { type: "delta", text: DELTA_TEXT, tokens: 1 };
      }
      yield { type: "done", finishReason: FinishReason.STOP };
    },
    ready: async () => undefined,
  };
}

describe("a reader that never reads", () => {
  let app: TestApp;
  const engine = hugeEngine();

  beforeAll(async () => {
    app = await startTestApp(
      { SLUICE_SSE_WRITE_TIMEOUT_MS: "500" },
      { models: registryWith([{ name: "huge", engine }]) },
    );
  });
  afterAll(async () => {
    await app?.close();
  });

  it("pauses the call, then ends it unbilled with its hold released", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const url = new URL(app.edgeUrl);
    const body = JSON.stringify({ model: "huge", stream: true, messages: [{ role: "user", content: "hi" }] });
    const socket = connect(Number(url.port), url.hostname);
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.on("error", () => undefined);
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${apiKey}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    // The client never reads: pause the socket so nothing is consumed on this side either.
    socket.pause();
    await eventually(async () => {
      const b = await balanceOf(app, accountId);
      expect(b.reserved).toBeGreaterThan(0n);
    }, 10_000);
    // The server ends the stuck stream, and the call is released, not billed.
    await eventually(
      async () => expect(await balanceOf(app, accountId)).toMatchObject({ spent: 0n, reserved: 0n }),
      15_000,
    );
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
    // Paused: it produced about what the socket buffers hold, far from its 256 MiB answer.
    expect(engine.pulled()).toBeLessThan(DELTAS / 2);
    socket.destroy();
    await closed;
  }, 40_000);
});
