/**
 * The client side of the open-streams measurement, in its own process so its 10,000 sockets
 * count against its own file limit and its own heap, not the suite's or Sluice's:
 * `TARGET_URL=… AUTH=… BODY=… COUNT=10000 node bench/stream-holder.ts`.
 *
 * It opens COUNT SSE streams, each on its own connection, at most OPENING at a time (a
 * listen backlog overflow would only add SYN retries), and counts a stream open once its 200
 * and its first `data:` frame arrived. It reports progress as JSON lines on stdout, then
 * holds every stream (reading whatever comes) until its stdin closes.
 */
import { request, type IncomingMessage } from "node:http";

const url = process.env.TARGET_URL ?? "";
const auth = process.env.AUTH ?? "";
const body = process.env.BODY ?? "";
const count = Number(process.env.COUNT ?? 0);
const opening = Number(process.env.OPENING ?? 200);
const timeoutMs = Number(process.env.OPEN_TIMEOUT_MS ?? 120_000);

const report = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);

let open = 0;
let failed = 0;
let firstError: string | undefined;
/** Streams that closed after they were counted open (Sluice or the upstream ended them). */
let closedLater = 0;
const held: IncomingMessage[] = [];

/** Opens one stream; resolves true once its first frame arrived, false on any failure. */
function openOne(): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (ok: boolean, why?: string) => {
      if (settled) return;
      settled = true;
      if (!ok && firstError === undefined) firstError = why;
      resolve(ok);
    };
    const req = request(url, {
      method: "POST",
      agent: false,
      headers: { authorization: auth, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      timeout: timeoutMs,
    });
    req.once("timeout", () => {
      req.destroy();
      done(false, "timeout before the first frame");
    });
    req.once("error", (err) => done(false, err.message));
    req.once("response", (res) => {
      if (res.statusCode !== 200) {
        let text = "";
        res.on("data", (d: Buffer) => {
          if (text.length < 300) text += d.toString();
        });
        res.once("end", () => done(false, `status ${res.statusCode}: ${text.slice(0, 300)}`));
        return;
      }
      res.on("data", (d: Buffer) => {
        if (!settled && d.includes("data:")) {
          req.setTimeout(0);
          held.push(res);
          res.once("close", () => {
            closedLater += 1;
          });
          done(true);
        }
      });
      res.once("end", () => done(false, "stream ended before its first frame"));
      res.once("error", (err) => done(false, err.message));
    });
    req.end(body);
  });
}

const started = performance.now();
let next = 0;
let lastReport = 0;
const worker = async () => {
  while (next < count) {
    next += 1;
    if (await openOne()) open += 1;
    else failed += 1;
    if (open + failed - lastReport >= 1000) {
      lastReport = open + failed;
      report({ open, failed, seconds: (performance.now() - started) / 1000 });
    }
  }
};
await Promise.all(Array.from({ length: Math.max(1, Math.min(opening, count)) }, worker));
report({ done: true, open, failed, firstError: firstError ?? null, seconds: (performance.now() - started) / 1000 });

let reported = 0;
const watch = setInterval(() => {
  if (closedLater !== reported) {
    reported = closedLater;
    report({ closedLater });
  }
}, 500);
process.stdin.resume();
process.stdin.on("end", () => {
  clearInterval(watch);
  for (const res of held) res.destroy();
  process.exit(0);
});
