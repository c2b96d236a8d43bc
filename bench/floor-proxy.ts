/**
 * The "floor" of issue 8: a bare pass-through proxy, node:http in and an undici `Pool` out,
 * with no rules at all (no auth, no limits, no accounting, no logging). It is what any Node
 * gateway pays before it does anything, so Sluice's figures are reported as a ratio to it.
 *
 * Run as its own process: `UPSTREAM=http://127.0.0.1:PORT PORT=0 node bench/floor-proxy.ts`.
 * It prints its URL on stdout and exits when its stdin closes. Every request is forwarded
 * with its method, path and body; the answer's status, content type and body are streamed
 * back as they arrive (SSE frames are not buffered).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { Pool } from "undici";

/** Hop-by-hop headers (RFC 9110 section 7.6.1) a proxy must not forward. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
]);

function forwardable(
  headers: IncomingMessage["headers"] | Record<string, string | string[] | undefined>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name.toLowerCase())) out[name] = value;
  }
  return out;
}

/**
 * Starts the floor proxy on 127.0.0.1 in front of `upstreamOrigin` and resolves with its URL.
 * Exported so a test or another bench can run it in-process; the suite runs it as a process.
 */
export async function startFloorProxy(
  upstreamOrigin: string,
  port = 0,
): Promise<{ url: string; close(): Promise<void> }> {
  // The same pool settings as Sluice's `openai` engine, so the floor differs only by rules.
  const pool = new Pool(upstreamOrigin, { connections: 128, keepAliveTimeout: 30_000 });
  const proxy = async (req: IncomingMessage, res: ServerResponse) => {
    const upstream = await pool.request({
      path: req.url ?? "/",
      method: req.method === "POST" ? "POST" : "GET",
      headers: forwardable(req.headers),
      body: req.method === "POST" ? req : null,
    });
    res.writeHead(upstream.statusCode, forwardable(upstream.headers));
    // flushHeaders: an SSE client sees the headers even before the first frame.
    res.flushHeaders();
    await pipeline(upstream.body, res);
  };
  const server = createServer((req, res) => {
    proxy(req, res).catch(() => {
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end("bad gateway");
      } else {
        res.destroy();
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const address = server.address();
  const bound = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}

if (import.meta.main) {
  const upstream = process.env.UPSTREAM;
  if (upstream === undefined) {
    process.stderr.write("floor-proxy: set UPSTREAM to the upstream origin, e.g. http://127.0.0.1:8000\n");
    process.exit(2);
  }
  const proxy = await startFloorProxy(new URL(upstream).origin, Number(process.env.PORT ?? 0));
  process.stdout.write(`${proxy.url}\n`);
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
}
