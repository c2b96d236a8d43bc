/**
 * Wall time of the extractive engine on a ~32K-token conversation, the largest the gateway
 * accepts for `service-extract`. Run: `npx node bench/extractive.bench.ts`; the suite
 * (`bench/run.ts`) runs it as a child with `--json` (one JSON line on stdout instead of the
 * table), `--iterations N` and `--conversation FILE` (writes the greedy scenario's messages, to
send the same input through Sluice).
 *
 * The conversation is synthetic English prose generated from a fixed seed, so figures are
 * comparable between runs and machines.
 */
import { writeFileSync } from "node:fs";
import { FinishReason } from "../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineMessage, EngineRequest } from "../src/engines/engine.ts";
import { mulberry32 } from "../src/engines/extractive/sampling.ts";
import { createExtractiveEngine } from "../src/engines/extractive/index.ts";
import { createTokenizer } from "../src/engines/tokenizer.ts";

const TARGET_TOKENS = 32_000;
const MESSAGES = 16;
const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const JSON_OUTPUT = process.argv.includes("--json");
const ITERATIONS = Math.max(1, Number(flag("--iterations") ?? 20));
const WARMUP = Math.min(5, ITERATIONS);

const random = mulberry32(20240601);
const pick = <T>(items: readonly T[]): T => {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error("empty list");
  return item;
};

const SUBJECTS = [
  "The harbour authority",
  "Our support team",
  "The new scheduler",
  "A junior engineer",
  "The city council",
  "The billing service",
  "Every regional office",
  "The research group",
  "A careful reviewer",
  "The night shift",
  "The storage cluster",
  "The marketing department",
  "An old lighthouse keeper",
  "The payment gateway",
];
const VERBS = [
  "reviewed",
  "postponed",
  "measured",
  "rebuilt",
  "questioned",
  "documented",
  "migrated",
  "celebrated",
  "monitored",
  "simplified",
  "audited",
  "replaced",
  "described",
  "tested",
];
const OBJECTS = [
  "the quarterly budget",
  "the cache invalidation rules",
  "the ferry timetable",
  "the tomato harvest",
  "the database replicas",
  "the onboarding checklist",
  "the rainfall records",
  "the retry policy",
  "the museum archive",
  "the invoice templates",
  "the solar panels",
  "the rate limiter",
  "the tide tables",
  "the coffee machine",
  "the incident report",
  "the bridge inspection",
];
const TAILS = [
  "before the winter storms arrived",
  "after a long discussion on Tuesday",
  "with surprising results",
  "because the customers kept asking",
  "although nobody had asked for it",
  "in less than a week",
  "while the rest of the team was travelling",
  "to everyone's relief",
  "despite the noisy neighbours",
  "as the auditors had recommended",
  "for the third time this year",
  "using only spreadsheets",
];

function sentence(): string {
  const s = `${pick(SUBJECTS)} ${pick(VERBS)} ${pick(OBJECTS)} ${pick(TAILS)}`;
  return random() < 0.15 ? `${s}, and ${pick(SUBJECTS).toLowerCase()} ${pick(VERBS)} ${pick(OBJECTS)}.` : `${s}.`;
}

function buildConversation(tokenizer: ReturnType<typeof createTokenizer>): EngineMessage[] {
  const perMessage = Math.floor(TARGET_TOKENS / MESSAGES);
  const messages: EngineMessage[] = [];
  for (let m = 0; m < MESSAGES; m++) {
    const role = m === 0 ? "system" : m % 2 === 1 ? "user" : "assistant";
    const parts: string[] = [];
    let tokens = 0;
    while (tokens < perMessage) {
      const paragraph = Array.from({ length: 3 + Math.floor(random() * 4) }, sentence).join(" ");
      parts.push(paragraph);
      tokens += tokenizer.count(paragraph) + 1;
    }
    messages.push({ role, content: parts.join("\n\n") });
  }
  return messages;
}

interface Scenario {
  name: string;
  question: string;
  extra: Partial<EngineRequest>;
}

const SCENARIOS: Scenario[] = [
  { name: "greedy (T=0)", question: "What happened to the retry policy and the rate limiter?", extra: {} },
  {
    name: "sampled (T=0.8, top_p 0.9, seed)",
    question: "What happened to the retry policy and the rate limiter?",
    extra: { temperature: 0.8, topP: 0.9, seed: 42n },
  },
  { name: "no match (lead summary)", question: "Explain quantum chromodynamics.", extra: {} },
  {
    name: "stop + max_tokens 16",
    question: "Who audited the solar panels?",
    extra: { stop: ["winter"], maxTokens: 16 },
  },
];

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN;
}

async function main(): Promise<void> {
  const tokenizer = createTokenizer();
  const engine = createExtractiveEngine({ tokenizer });
  await engine.ready();
  const history = buildConversation(tokenizer);
  const dump = flag("--conversation");
  if (dump !== undefined) {
    const first = SCENARIOS[0];
    writeFileSync(dump, JSON.stringify([...history, { role: "user", content: first?.question ?? "" }]));
  }
  const signal = new AbortController().signal;

  const rows: string[][] = [];
  for (const scenario of SCENARIOS) {
    const messages = [...history, { role: "user", content: scenario.question }];
    const inputTokens = tokenizer.countMessages(messages, Number.MAX_SAFE_INTEGER) ?? 0;
    const req: EngineRequest = { model: "service-extract", messages, maxTokens: 4096, stop: [], ...scenario.extra };
    const times: number[] = [];
    let outputTokens = 0;
    let finish = "";
    for (let i = 0; i < WARMUP + ITERATIONS; i++) {
      const start = performance.now();
      let tokens = 0;
      for await (const event of engine.generate(req, signal)) {
        if (event.type === "delta") tokens += event.tokens;
        else finish = event.finishReason === FinishReason.LENGTH ? "length" : "stop";
      }
      const elapsed = performance.now() - start;
      if (i >= WARMUP) times.push(elapsed);
      outputTokens = tokens;
    }
    times.sort((a, b) => a - b);
    rows.push([
      scenario.name,
      String(inputTokens),
      String(outputTokens),
      finish,
      percentile(times, 0.5).toFixed(2),
      percentile(times, 0.95).toFixed(2),
      (times[times.length - 1] ?? Number.NaN).toFixed(2),
    ]);
  }

  if (JSON_OUTPUT) {
    const keys = ["scenario", "inputTokens", "outputTokens", "finish", "medianMs", "p95Ms", "maxMs"] as const;
    const json = rows.map((row) =>
      Object.fromEntries(keys.map((k, i) => [k, i === 0 || i === 3 ? row[i] : Number(row[i])])),
    );
    process.stdout.write(
      `${JSON.stringify({ iterations: ITERATIONS, warmup: WARMUP, messages: MESSAGES + 1, rows: json })}\n`,
    );
    return;
  }
  const header = ["scenario", "input tok", "output tok", "finish", "median ms", "p95 ms", "max ms"];
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join(" | ");
  console.log(`extractive engine: ${ITERATIONS} iterations after ${WARMUP} warm-up, ${MESSAGES + 1} messages`);
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("-|-"));
  for (const row of rows) console.log(line(row));
}

await main();
