import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createExtractiveEngine } from "../src/engines/extractive/index.ts";
import { createTokenizer } from "../src/engines/tokenizer.ts";
import { eventually } from "./support/envelopes.ts";
import { balanceOf, usageRecordsOf } from "./support/ledger.ts";
import { registryWith, scriptedEngine } from "./support/engines.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";
import { asRecord, CHAT_MESSAGES, postChat } from "./support/http.ts";
import { chunksOf, parseSse } from "./support/sse.ts";

/**
 * SPEC's billing guarantees and DESIGN's invariants, end to end: the cap is never passed
 * under concurrency, each completed call is charged ceil(usage x price) with exactly one
 * usage record, and failed, refused or abandoned calls cost nothing and leave no hold.
 */
const PRICED = { input: 333_333, output: 777_777 };
const failing = scriptedEngine({ failAfter: { deltas: 3, error: () => new Error("boom") } });
const slowStream = scriptedEngine({ deltas: Array.from({ length: 200 }, (_, i) => ` s${i}`), delayMs: 20 });
const greedy = scriptedEngine({ deltas: Array.from({ length: 50 }, (_, i) => ` g${i}`) });
const slowUnary = scriptedEngine({ deltas: Array.from({ length: 200 }, (_, i) => ` u${i}`), delayMs: 20 });

let app: TestApp;

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

beforeAll(async () => {
  app = await startTestApp(
    {},
    {
      models: registryWith([
        {
          name: "priced",
          engine: createExtractiveEngine({ tokenizer: createTokenizer() }),
          inputUsdMicrosPerMillion: PRICED.input,
          outputUsdMicrosPerMillion: PRICED.output,
        },
        { name: "failing", engine: failing },
        { name: "slow-stream", engine: slowStream },
        { name: "slow-unary", engine: slowUnary },
        { name: "greedy", engine: greedy, inputUsdMicrosPerMillion: 1, outputUsdMicrosPerMillion: 1_000_000 },
      ]),
    },
  );
});

afterAll(async () => {
  await app?.close();
});

const question = (i: number) => [
  {
    role: "system",
    content: `Note ${i}: rivers carry water to the sea. Mountains are tall. Deserts are dry and hot in summer.`,
  },
  { role: "user", content: `Question ${i}: where do rivers carry water, and what are deserts like?` },
];

describe("the spend cap under concurrency", () => {
  it("40 concurrent calls never pass a small cap; successes have records, refusals are 402", async () => {
    const CAP = 500n;
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: CAP, rps: 1000, burst: 1000 });
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        postChat(app, apiKey, { messages: question(i), ...(i % 2 === 0 && { max_tokens: 16 }) }),
      ),
    );

    const ok = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status !== 200);
    expect(ok.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.status).toBe(402);
      expect(asRecord(asRecord(r.json).error).code).toBe("spend_cap_exceeded");
    }

    const balance = await balanceOf(app, accountId);
    expect(balance.spent).toBeLessThanOrEqual(CAP);
    expect(balance.reserved).toBe(0n);
    const records = await usageRecordsOf(app, accountId);
    const okIds = ok.map((r) => String(asRecord(r.json).id)).sort();
    expect(records.map((r) => r.id).sort()).toEqual(okIds);
    expect(records.reduce((sum, r) => sum + r.costUsdMicros, 0n)).toBe(balance.spent);
    for (const r of ok) {
      const body = asRecord(r.json);
      const usage = body.usage as Usage;
      const record = records.find((x) => x.id === body.id);
      expect({ p: record?.promptTokens, c: record?.completionTokens }).toEqual({
        p: BigInt(usage.prompt_tokens),
        c: BigInt(usage.completion_tokens),
      });
      expect(record?.costUsdMicros).toBe(BigInt(usage.prompt_tokens + 2 * usage.completion_tokens));
    }
  });
});

describe("charges and usage records", () => {
  it("each call is charged ceil(usage x price) to the micro, with exactly one record per call", async () => {
    const { apiKey, accountId, apiKeyId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const ids: string[] = [];
    let expectedSpent = 0n;
    for (let i = 0; i < 6; i++) {
      const stream = i % 2 === 1;
      const reply = await postChat(app, apiKey, {
        model: "priced",
        messages: question(i),
        max_tokens: 5 + i * 7,
        stream,
      });
      expect(reply.status).toBe(200);
      let id: string;
      let usage: Usage;
      if (stream) {
        const chunks = chunksOf(parseSse(reply.text));
        const last = chunks[chunks.length - 1];
        if (!last?.usage) throw new Error("no usage chunk");
        id = last.id;
        usage = last.usage;
      } else {
        const body = asRecord(reply.json);
        id = String(body.id);
        usage = body.usage as Usage;
      }
      ids.push(id);
      const cost = BigInt(
        Math.ceil((usage.prompt_tokens * PRICED.input + usage.completion_tokens * PRICED.output) / 1_000_000),
      );
      expectedSpent += cost;
      const records = await usageRecordsOf(app, accountId);
      const record = records.find((r) => r.id === id);
      expect(record).toBeDefined();
      expect({
        cost: record?.costUsdMicros,
        model: record?.model,
        key: record?.apiKeyId,
        account: record?.accountId,
      }).toEqual({ cost, model: "priced", key: apiKeyId, account: accountId });
      expect((await balanceOf(app, accountId)).spent).toBe(expectedSpent);
    }
    const records = await usageRecordsOf(app, accountId);
    expect(records).toHaveLength(ids.length);
    expect(records.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect((await balanceOf(app, accountId)).reserved).toBe(0n);
  });

  it("failed calls (mid-stream or unary) are not charged and leave no record", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const unary = await postChat(app, apiKey, { model: "failing", messages: CHAT_MESSAGES });
    expect(unary.status).toBe(500);
    const streamed = await postChat(app, apiKey, { model: "failing", messages: CHAT_MESSAGES, stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toContain('data: {"error":"service_unavailable","status":500}\n\ndata: [DONE]\n\n');
    const balance = await balanceOf(app, accountId);
    expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });

  it("a non-streaming call that outgrows the cap mid-way is refused with 402 and not billed", async () => {
    // Admitted (the cap covers the prompt and some output), then the extension is refused.
    const { apiKey, accountId } = await app.newAccount({ capUsdMicros: 10n, rps: 1000, burst: 1000 });
    const reply = await postChat(app, apiKey, { model: "greedy", messages: CHAT_MESSAGES });
    expect(reply.status).toBe(402);
    expect(asRecord(asRecord(reply.json).error).code).toBe("spend_cap_exceeded");
    expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0);
    const balance = await balanceOf(app, accountId);
    expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });
});

describe("client disconnects", () => {
  it("aborting a stream mid-way cancels the engine, releases the reservation, charges nothing", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const controller = new AbortController();
    const res = await fetch(`${app.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: "slow-stream", messages: CHAT_MESSAGES, stream: true }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body?.getReader();
    if (!reader) throw new Error("no body");
    let seen = "";
    while (!seen.includes("data: {")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("stream ended early");
      seen += new TextDecoder().decode(value);
    }
    const during = await balanceOf(app, accountId);
    expect(during.reserved).toBeGreaterThan(0n);
    expect(during.spent).toBe(0n);

    controller.abort();
    await reader.cancel().catch(() => undefined);
    await eventually(async () => expect(slowStream.probe.signals[0]?.aborted).toBe(true), 3000);
    await eventually(async () => {
      const balance = await balanceOf(app, accountId);
      expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
    }, 3000);
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });

  it("aborting a non-streaming call while the engine runs cancels it and charges nothing", async () => {
    const { apiKey, accountId } = await app.newAccount({ rps: 1000, burst: 1000 });
    const controller = new AbortController();
    const pending = postChat(
      app,
      apiKey,
      { model: "slow-unary", messages: CHAT_MESSAGES },
      { signal: controller.signal },
    ).then(
      () => "answered",
      () => "aborted",
    );
    await slowUnary.probe.started;
    expect((await balanceOf(app, accountId)).reserved).toBeGreaterThan(0n);
    controller.abort();
    expect(await pending).toBe("aborted");
    await eventually(async () => expect(slowUnary.probe.signals[0]?.aborted).toBe(true), 3000);
    await eventually(async () => {
      const balance = await balanceOf(app, accountId);
      expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
    }, 3000);
    expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
  });
});
