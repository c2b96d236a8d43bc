import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { createTokenizer } from "./tokenizer.ts";

const t = createTokenizer();

describe("tokenizer", () => {
  it("counts ordinary text exactly as o200k_base does", () => {
    const text = "Sluice meters spend. It reserves before a call and refunds after it. ".repeat(50);
    expect(t.count(text)).toBe(countTokens(text));
    expect(t.count("")).toBe(0);
  });

  it("counts literal special-token text as plain text instead of throwing", () => {
    expect(t.count("<|endoftext|>")).toBeGreaterThan(1);
  });

  it("cuts unbroken runs into pieces, overcounting by a hair at most", () => {
    const cjk = "漢字かな交じり文の例です。".repeat(500);
    const exact = countTokens(cjk);
    expect(t.count(cjk)).toBeGreaterThanOrEqual(exact);
    expect(t.count(cjk)).toBeLessThanOrEqual(Math.ceil(exact * 1.01));
  });

  it("counts long runs of spaces and newlines in pieces too", () => {
    for (const ws of [" ", "\n", "\t"]) {
      const text = `${ws.repeat(200_000)}hi`;
      const n = t.count(text);
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual(Math.ceil(countTokens(ws.repeat(1_000)) * 200 * 1.01) + 2);
    }
  });

  it("never cuts a surrogate pair in half", () => {
    const emoji = "🦀".repeat(1_000);
    expect(t.count(emoji)).toBeLessThanOrEqual(Math.ceil(countTokens(emoji) * 1.01));
  });

  it("refuses a huge unbroken input against the limit without counting all of it", () => {
    expect(t.countMessages([{ role: "user", content: "a".repeat(2_000_000) }], 32_768)).toBeUndefined();
    expect(t.countMessages([{ role: "user", content: "a".repeat(1_000) }], 32_768)).toBe(
      3 + 3 + t.count("a".repeat(1_000)),
    );
  });

  it("adds framing per message and counts the extra texts as input", () => {
    const base = t.countMessages([{ role: "user", content: "hi" }], 100);
    expect(base).toBe(3 + 3 + 1);
    const tools = JSON.stringify([
      { type: "function", function: { name: "get_weather", parameters: { type: "object" } } },
    ]);
    expect(t.countMessages([{ role: "user", content: "hi" }], 100, [tools])).toBe((base ?? 0) + t.count(tools));
    expect(t.countMessages([{ role: "user", content: "hi" }], 10, ["word ".repeat(50)])).toBeUndefined();
  });

  it("counts a message's name as input: its own o200k tokens plus one framing token", () => {
    const name = "n_".repeat(128);
    expect(name).toHaveLength(256);
    const own = countTokens(name);
    expect(own).toBeGreaterThan(1);
    const plain = t.countMessages([{ role: "user", content: "hi" }], 32_768) ?? 0;
    const named = t.countMessages([{ role: "user", content: "hi", name }], 32_768) ?? 0;
    expect(named - plain).toBeGreaterThanOrEqual(own + 1);
  });

  it("counts a tool message's tool_call_id as input", () => {
    const toolCallId = `${"call_".repeat(51)}x`;
    expect(toolCallId).toHaveLength(256);
    const own = countTokens(toolCallId);
    expect(own).toBeGreaterThan(0);
    const plain = t.countMessages([{ role: "tool", content: "42" }], 32_768) ?? 0;
    const answered = t.countMessages([{ role: "tool", content: "42", toolCallId }], 32_768) ?? 0;
    expect(answered - plain).toBeGreaterThanOrEqual(own);
  });

  it("refuses a conversation whose content is small but whose names and tool_call_ids pass the limit", () => {
    const name = "n_".repeat(128);
    const toolCallId = `${"call_".repeat(51)}x`;
    const messages = Array.from({ length: 400 }, (_, i) =>
      i % 2 === 0 ? { role: "user", content: "hi", name } : { role: "tool", content: "ok", toolCallId },
    );
    const contentOnly = t.countMessages(
      messages.map((m) => ({ role: m.role, content: m.content })),
      32_768,
    );
    expect(contentOnly).toBeDefined();
    expect(contentOnly ?? Number.POSITIVE_INFINITY).toBeLessThan(4_000);
    expect(t.countMessages(messages, 32_768)).toBeUndefined();
  });

  it("refuses a huge name against the limit without counting all of it", () => {
    expect(t.countMessages([{ role: "user", content: "hi", name: "a".repeat(2_000_000) }], 32_768)).toBeUndefined();
    expect(
      t.countMessages([{ role: "tool", content: "hi", toolCallId: "b".repeat(2_000_000) }], 32_768),
    ).toBeUndefined();
  });
});
