/**
 * How long Sluice takes to refuse a request body over the 32 MiB limit, two ways: a declared
 * `Content-Length` over the limit (refusable from the headers, so it should cost about one
 * round trip) and a chunked body that only crosses the limit as it arrives (so it costs at
 * least the time to send 32 MiB over loopback). Each is the median of several fresh
 * connections, timed from the request's start to the refusal's status line.
 */
import { request, type IncomingMessage } from "node:http";

const LIMIT = 32 * 1024 * 1024;
const CHUNK = Buffer.alloc(1024 * 1024, 0x20);
/** The chunked upload ends here if no refusal came: one chunk past the limit. */
const MAX_SEND = LIMIT + CHUNK.length;

/** One way of sending: its median and what the answers were. */
export interface RefusalFigures {
  runs: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** Status codes seen, or the error of a run that got none (e.g. "ECONNRESET"). */
  outcomes: Record<string, number>;
}

/** Both ways of sending an oversized body. */
export interface RefusalResult {
  declared: RefusalFigures;
  chunked: RefusalFigures;
  /**
   * The same chunked upload (33 MiB) drained by the fake upstream's sink before it answers:
   * what moving it over loopback costs at all, for reading `chunked` against.
   */
  chunkedToUpstream: RefusalFigures | null;
}

interface Outcome {
  ms: number;
  outcome: string;
}

function once(url: string, authorization: string, declared: boolean): Promise<Outcome> {
  return new Promise((resolve) => {
    const started = performance.now();
    let finished = false;
    const finish = (outcome: string) => {
      if (finished) return;
      finished = true;
      resolve({ ms: performance.now() - started, outcome });
      req.destroy();
    };
    const headers: Record<string, string> = { authorization, "content-type": "application/json" };
    if (declared) headers["content-length"] = String(LIMIT + 1);
    const req = request(url, { method: "POST", agent: false, headers, timeout: 30_000 });
    req.once("response", (res: IncomingMessage) => {
      res.resume();
      finish(String(res.statusCode));
    });
    req.once("timeout", () => finish("timeout"));
    req.once("error", (err: NodeJS.ErrnoException) => finish(err.code ?? err.message));
    if (declared) {
      req.flushHeaders();
      return;
    }
    let sent = 0;
    const pump = () => {
      while (!finished && sent < MAX_SEND) {
        sent += CHUNK.length;
        if (!req.write(CHUNK)) {
          req.once("drain", pump);
          return;
        }
      }
      if (!finished) req.end();
    };
    pump();
  });
}

async function series(url: string, authorization: string, declared: boolean, runs: number): Promise<RefusalFigures> {
  const times: number[] = [];
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < runs; i++) {
    const r = await once(url, authorization, declared);
    times.push(r.ms);
    outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
  }
  times.sort((a, b) => a - b);
  return {
    runs,
    medianMs: times[Math.floor((times.length - 1) / 2)] ?? Number.NaN,
    minMs: times[0] ?? Number.NaN,
    maxMs: times[times.length - 1] ?? Number.NaN,
    outcomes,
  };
}

/**
 * Times the refusal of an oversized body at `edgeUrl`, with a valid key (so size is the only
 * fault), and the same chunked upload drained by the fake upstream at `upstreamUrl` (".../v1") as the
 * wire's own cost.
 */
export async function measureRefusal(
  edgeUrl: string,
  authorization: string,
  runs: { declared: number; chunked: number },
  upstreamUrl?: string,
): Promise<RefusalResult> {
  const url = `${edgeUrl}/v1/chat/completions`;
  await series(url, authorization, true, 2); // warm-up
  const declared = await series(url, authorization, true, runs.declared);
  await series(url, authorization, false, 1); // warm-up
  const chunked = await series(url, authorization, false, runs.chunked);
  const chunkedToUpstream =
    upstreamUrl === undefined ? null : await series(`${upstreamUrl}/sink`, "Bearer bench", false, runs.chunked);
  return { declared, chunked, chunkedToUpstream };
}
