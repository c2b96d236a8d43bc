import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

/**
 * Issue 7's reproducer of leaked holds: streaming calls with a heavy prompt (n = 8, a
 * 200-sentence system message) cut 0 to 8 ms after they were sent, so that callers leave
 * during every stage from the admission round trip to mid-stream. Before the lifecycle was
 * owned by one place, about a third left a hold that was renewed forever.
 */

const SYSTEM = Array.from(
  { length: 200 },
  (_, i) => `Sentence ${i} says that Sluice meters spend and caps it monthly.`,
).join(" ");
const CALLS = 200;

/**
 * Sends a whole request on a raw socket, cuts the connection `cutMs` after it was sent; resolves with what came
 * back.
 */
function sendAndCut(edgeUrl: string, request: string, cutMs: number): Promise<string> {
  const url = new URL(edgeUrl);
  return new Promise((resolve) => {
    let got = "";
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(request, () => setTimeout(() => socket.destroy(), cutMs));
    });
    socket.on("data", (d: Buffer) => {
      got += d.toString();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(got));
  });
}

/** A seeded generator, so that a failure replays with the same cut times. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("streams cut at every early stage", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("leave no hold behind, and only whole answers are billed", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 100_000, burst: 100_000, capUsdMicros: 1_000_000_000n });
    const random = seeded(7);
    const body = JSON.stringify({
      stream: true,
      n: 8,
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: "What does Sluice do?" },
      ],
    });
    const request =
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${apiKey}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    let completed = 0;
    let next = 0;
    // Sixteen callers at a time, each cutting its call 0 to 8 ms after sending it.
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < CALLS) {
          next++;
          const got = await sendAndCut(app.edgeUrl, request, Math.floor(random() * 9));
          if (got.includes("data: [DONE]")) completed++;
        }
      }),
    );
    const settled = await eventually(async () => {
      const b = await balanceOf(app, accountId);
      expect(b.reserved).toBe(0n);
      return b;
    }, 10_000);
    // Every record is a call whose engine finished; a caller that saw [DONE] has one.
    const records = await usageRecordsOf(app, accountId);
    expect(records.length).toBeGreaterThanOrEqual(completed);
    expect(records.length).toBeLessThanOrEqual(CALLS);
    expect(settled.spent).toBe(records.reduce((sum, r) => sum + r.costUsdMicros, 0n));
  }, 60_000);
});
