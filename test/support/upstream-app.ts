import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { eventually } from "./envelopes.ts";
import { balanceOf, usageRecordsOf } from "./ledger.ts";
import { UPSTREAM_SECRETS, type FakeUpstream, type RecordedRequest } from "./fake-upstream.ts";
import type { AppOptions } from "../../src/app.ts";
import { startTestApp, type TestApp } from "./harness.ts";

/**
 * Sluice in front of fake OpenAI-compatible upstreams: a models file written to a temp
 * directory and passed as `SLUICE_MODELS`, exactly as an operator would deploy it.
 */

/** The prices of README's `llama-3.1-8b` example, in micros per million tokens. */
export const LLAMA_PRICES = { inputUsdMicrosPerMillion: 200_000, outputUsdMicrosPerMillion: 600_000 } as const;

/** One `openai` entry of the models file; `engine` and the prices are filled in. */
export interface OpenAIModelSpec {
  name: string;
  baseUrl: string | string[];
  upstreamModel?: string;
  apiKeyEnv?: string;
  connectTimeoutMs?: number;
  firstByteTimeoutMs?: number;
  idleTimeoutMs?: number;
  breakerFailures?: number;
  breakerOpenMs?: number;
}

/** A test app serving `service-extract` and the given upstream models. */
export interface UpstreamApp extends TestApp {
  modelsPath: string;
}

/**
 * Starts Sluice with a models file holding `service-extract` plus `models` (priced as
 * README's llama example). `env` is the app config; `lookupEnv` is where `apiKeyEnv` is read.
 */
export async function startUpstreamApp(
  models: OpenAIModelSpec[],
  options: { env?: Record<string, string>; lookupEnv?: Record<string, string>; app?: Partial<AppOptions> } = {},
): Promise<UpstreamApp> {
  const dir = await mkdtemp(join(tmpdir(), "sluice-upstream-"));
  const modelsPath = join(dir, "models.json");
  const file = {
    models: [
      {
        name: "service-extract",
        engine: "extractive",
        inputUsdMicrosPerMillion: 1_000_000,
        outputUsdMicrosPerMillion: 2_000_000,
      },
      ...models.map((m) => ({ engine: "openai", ...LLAMA_PRICES, ...m })),
    ],
  };
  await writeFile(modelsPath, JSON.stringify(file));
  let app: TestApp;
  try {
    app = await startTestApp(
      { SLUICE_MODELS: modelsPath, ...options.env },
      { ...options.app, env: { ...options.lookupEnv } },
    );
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    ...app,
    modelsPath,
    async close() {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** What a call costs at LLAMA_PRICES, rounded up to a whole micro (DESIGN: Money). */
export function llamaCost(promptTokens: number, completionTokens: number): bigint {
  return BigInt(
    Math.ceil(
      (promptTokens * LLAMA_PRICES.inputUsdMicrosPerMillion +
        completionTokens * LLAMA_PRICES.outputUsdMicrosPerMillion) /
        1_000_000,
    ),
  );
}

/** The chat-completion requests an upstream received, in order. */
export function chatRequests(upstream: FakeUpstream): RecordedRequest[] {
  return upstream.requests.filter((r) => r.method === "POST" && r.path === "/v1/chat/completions");
}

/** The body of the last chat request an upstream received. */
export function lastChatBody(upstream: FakeUpstream): Record<string, unknown> {
  const last = chatRequests(upstream).at(-1);
  if (!last?.body) throw new Error("the upstream received no chat request with a JSON body");
  return last.body;
}

/** A response as text plus headers: a `Reply` from http.ts or a `/readyz` answer. */
export interface Exposed {
  text: string;
  headers: Headers;
}

/**
 * Asserts that nothing of the upstreams leaks to a caller: no planted secret of the fake's
 * error bodies, no upstream URL, host:port or port-bearing address, in the body or any header.
 */
export function expectNoUpstreamLeak(reply: Exposed, upstreams: readonly FakeUpstream[]): void {
  const needles: string[] = [...UPSTREAM_SECRETS, "internal-host", "sk-upstream"];
  for (const u of upstreams) needles.push(u.url, `127.0.0.1:${u.port}`, `localhost:${u.port}`);
  const headerText = [...reply.headers.entries()].map(([k, v]) => `${k}: ${v}`).join("\n");
  for (const needle of needles) {
    expect(reply.text, `body leaks ${needle}`).not.toContain(needle);
    expect(headerText, `headers leak ${needle}`).not.toContain(needle);
  }
}

/** Asserts that an account was never charged: nothing spent, nothing held, no usage record. */
export async function expectUnbilled(app: TestApp, accountId: string): Promise<void> {
  await eventually(async () => {
    const balance = await balanceOf(app, accountId);
    expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: 0n, reserved: 0n });
  }, 3000);
  expect(await usageRecordsOf(app, accountId)).toHaveLength(0);
}

/** Asserts exactly one usage record and a charge equal to `llamaCost` of the given usage. */
export async function expectBilledOnce(
  app: TestApp,
  accountId: string,
  model: string,
  usage: { prompt_tokens: number; completion_tokens: number },
): Promise<void> {
  const cost = llamaCost(usage.prompt_tokens, usage.completion_tokens);
  const balance = await balanceOf(app, accountId);
  expect({ spent: balance.spent, reserved: balance.reserved }).toEqual({ spent: cost, reserved: 0n });
  const records = await usageRecordsOf(app, accountId);
  expect(
    records.map((r) => ({
      model: r.model,
      prompt: r.promptTokens,
      completion: r.completionTokens,
      cost: r.costUsdMicros,
    })),
  ).toEqual([{ model, prompt: BigInt(usage.prompt_tokens), completion: BigInt(usage.completion_tokens), cost }]);
}

/** A promise that resolves after `ms`. */
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
