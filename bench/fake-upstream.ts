/**
 * The benchmark's fake OpenAI-compatible model server, run as its own process:
 * `node bench/fake-upstream.ts [--hold]` (PORT from the environment, 0 for any free port).
 * It prints its base URL ("http://127.0.0.1:PORT/v1") on stdout and exits when its stdin
 * closes, so it never outlives the suite that started it.
 *
 * Unlike `test/support/fake-upstream.ts` it records nothing, so it does not grow over a long
 * run and costs the same on the first request as on the millionth: the suite measures Sluice
 * and the floor proxy, not the upstream.
 *
 * - Fast mode (default): `POST <any prefix>/chat/completions` answers at once. With
 *   `stream: true` it sends a role chunk, {@link CONTENT_CHUNKS} content chunks (one word
 *   each), a finish chunk, a usage chunk when `stream_options.include_usage` is set, and
 *   `[DONE]`, each frame its own write, as a model server sends tokens. Without `stream`, one
 *   JSON completion with the same 16 words and usage.
 * - Hold mode (`--hold`): a stream sends its role chunk and first word, then stays open until
 *   the client leaves; the open-streams measurement uses it.
 *
 * - Any other path drains the body without keeping it and answers 404: a sink whose cost is
 *   the wire's alone.
 *
 * Any path prefix is accepted, so a models file can list one server under many `baseUrl`s
 * (one connection pool each, as with many model servers).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** Content chunks of every answer: the "16 chunks". */
export const CONTENT_CHUNKS = 16;
/** Prompt tokens reported in usage, whatever the prompt. */
const PROMPT_TOKENS = 24;

const WORDS = Array.from({ length: CONTENT_CHUNKS }, (_, i) => (i === 0 ? "token0" : ` token${i}`));
const usage = {
  prompt_tokens: PROMPT_TOKENS,
  completion_tokens: CONTENT_CHUNKS,
  total_tokens: PROMPT_TOKENS + CONTENT_CHUNKS,
};

interface ChatBody {
  model?: unknown;
  stream?: unknown;
  stream_options?: { include_usage?: unknown } | null;
}

let nextId = 0;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

const write = (res: ServerResponse, data: string): Promise<void> =>
  new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.write(data, () => resolve());
  });

async function stream(res: ServerResponse, model: string, includeUsage: boolean, hold: boolean): Promise<void> {
  const head = {
    id: `chatcmpl-bench${++nextId}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const frame = (delta: Record<string, string>, finish: string | null) =>
    `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  await write(res, frame({ role: "assistant", content: "" }, null));
  if (hold) {
    await write(res, frame({ content: WORDS[0] ?? "" }, null));
    return; // open until the client (Sluice) closes it
  }
  for (const word of WORDS) {
    if (res.destroyed) return;
    await write(res, frame({ content: word }, null));
  }
  await write(res, frame({}, "stop"));
  if (includeUsage) await write(res, `data: ${JSON.stringify({ ...head, choices: [], usage })}\n\n`);
  await write(res, "data: [DONE]\n\n");
  res.end();
}

async function handle(req: IncomingMessage, res: ServerResponse, hold: boolean): Promise<void> {
  if (req.method !== "POST" || !(req.url ?? "").split("?")[0]?.endsWith("/chat/completions")) {
    // Any other path drains the body without keeping it, then answers 404: a sink that costs
    // only the wire (the refusal bench times a 33 MiB upload against it).
    req.resume();
    await new Promise<void>((resolve) => {
      req.once("end", resolve);
      req.once("error", () => resolve());
    });
    return sendJson(
      res,
      404,
      JSON.stringify({
        error: { message: "not found", type: "invalid_request_error", param: null, code: "not_found" },
      }),
    );
  }
  const raw = await readBody(req);
  let body: ChatBody;
  try {
    body = JSON.parse(raw) as ChatBody;
  } catch {
    return sendJson(
      res,
      400,
      JSON.stringify({
        error: { message: "invalid JSON", type: "invalid_request_error", param: null, code: "invalid_json" },
      }),
    );
  }
  const model = typeof body.model === "string" ? body.model : "bench-upstream";
  if (body.stream === true) return stream(res, model, body.stream_options?.include_usage === true, hold);
  const message = { role: "assistant", content: WORDS.join("") };
  sendJson(
    res,
    200,
    JSON.stringify({
      id: `chatcmpl-bench${++nextId}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: "stop" }],
      usage,
    }),
  );
}

const hold = process.argv.includes("--hold");
const server = createServer((req, res) => {
  handle(req, res, hold).catch(() => res.destroy());
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  process.stdout.write(`http://127.0.0.1:${port}/v1\n`);
});
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
