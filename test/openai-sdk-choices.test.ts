import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./support/harness.ts";

describe("n choices through the openai SDK", () => {
  let app: TestApp;
  let client: OpenAI;
  beforeAll(async () => {
    app = await startTestApp();
    const { apiKey } = await app.newAccount({ rps: 100, burst: 100 });
    client = new OpenAI({ baseURL: `${app.edgeUrl}/v1`, apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await app?.close();
  });

  const messages = [
    {
      role: "system" as const,
      content: "Sluices meter water. Gateways meter spend. Caps stop overspending. Keys are rate limited.",
    },
    { role: "user" as const, content: "What do gateways meter?" },
  ];

  it("returns n choices with their indexes", async () => {
    const reply = await client.chat.completions.create({
      model: "service-extract",
      messages,
      n: 2,
      temperature: 1,
      seed: 3,
    });
    expect(reply.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(reply.choices.every((c) => (c.message.content ?? "").length > 0 && c.finish_reason === "stop")).toBe(true);
  });

  it("streams n choices, each opened with the role and closed with its finish reason", async () => {
    const stream = await client.chat.completions.create({ model: "service-extract", messages, n: 2, stream: true });
    const text = ["", ""];
    const roles: number[] = [];
    const finishes: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.role) roles.push(c.index);
        text[c.index] += c.delta.content ?? "";
        if (c.finish_reason) finishes.push(c.index);
      }
      usage = chunk.usage ?? usage;
    }
    expect(roles).toEqual([0, 1]);
    expect(finishes).toEqual([0, 1]);
    expect(text[0]).toBe(text[1]);
    expect(usage?.completion_tokens).toBeGreaterThan(0);
  });
});
