import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, gzipSync } from "node:zlib";

/** Where `npm run console:build` writes the console, committed so `npm start` needs no build. */
export const CONSOLE_DIST = fileURLToPath(new URL("../../console/dist/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
};

/**
 * The console's own rules: its scripts and styles come from this origin only, and it talks to
 * this origin only (the Connect calls), so an injected script could not send a key elsewhere.
 */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

interface Asset {
  type: string;
  raw: Buffer;
  gzip: Buffer;
  br: Buffer;
  etag: string;
  /** Vite names built assets by content hash: they never change under their name. */
  immutable: boolean;
}

/** The built console, held in memory and compressed once. */
export interface ConsoleAssets {
  /** Serves `/console` and everything under it. */
  serve(req: IncomingMessage, res: ServerResponse, path: string): void;
  /** How many files were loaded (0 when the build is missing). */
  readonly files: number;
}

function listFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? listFiles(path) : [path];
  });
}

function loadAsset(path: string, dir: string): [string, Asset] {
  const raw = readFileSync(path);
  const url = `/console/${relative(dir, path).split(sep).join("/")}`;
  return [
    url,
    {
      type: TYPES[extname(path)] ?? "application/octet-stream",
      raw,
      gzip: gzipSync(raw, { level: 9 }),
      br: brotliCompressSync(raw),
      etag: `"${createHash("sha256").update(raw).digest("base64url").slice(0, 22)}"`,
      immutable: url.startsWith("/console/assets/"),
    },
  ];
}

/** Picks the smallest encoding the client accepts. */
function encodingOf(req: IncomingMessage, asset: Asset): ["br" | "gzip" | undefined, Buffer] {
  const accepted = String(req.headers["accept-encoding"] ?? "");
  if (/\bbr\b/.test(accepted)) return ["br", asset.br];
  if (/\bgzip\b/.test(accepted)) return ["gzip", asset.gzip];
  return [undefined, asset.raw];
}

/**
 * The files of a build, read and compressed once per process (brotli at its best level takes
 * about half a second of blocked event loop for the whole build): every app a process starts
 * (a test file starts many) serves the same committed build. A missing build is not
 * remembered, so one built later is found.
 */
const builds = new Map<string, Map<string, Asset>>();
function compressedBuild(dir: string): Map<string, Asset> {
  const cached = builds.get(dir);
  if (cached) return cached;
  const assets = new Map(existsSync(dir) ? listFiles(dir).map((p) => loadAsset(p, dir)) : []);
  if (assets.size > 0) builds.set(dir, assets);
  return assets;
}

/**
 * Loads the built console from `dir` and serves it: files by path, and `index.html` for every
 * other path under `/console` (the page routes by path, so a link to `/console/billing` opens
 * the billing page). A missing build is reported by `files === 0`; its pages answer 503.
 */
export function loadConsoleAssets(dir: string = CONSOLE_DIST): ConsoleAssets {
  const assets = compressedBuild(dir);
  const index = assets.get("/console/index.html");
  return {
    files: assets.size,
    serve(req, res, path) {
      const file = assets.get(path);
      // A missing hashed asset is a 404, not the page: a script tag must not receive HTML.
      const asset = file ?? (path.startsWith("/console/assets/") ? undefined : index);
      if (!asset) {
        res.writeHead(index ? 404 : 503, { "content-type": "text/plain; charset=utf-8", ...CONSOLE_SECURITY_HEADERS });
        res.end(index ? "Not found\n" : "The console is not built: run npm run console:build\n");
        return;
      }
      const headers: Record<string, string> = {
        ...CONSOLE_SECURITY_HEADERS,
        "content-type": asset.type,
        etag: asset.etag,
        vary: "accept-encoding",
        "cache-control": asset.immutable ? "public, max-age=31536000, immutable" : "no-cache",
      };
      if (req.headers["if-none-match"] === asset.etag) {
        res.writeHead(304, headers);
        res.end();
        return;
      }
      const [encoding, body] = encodingOf(req, asset);
      if (encoding) headers["content-encoding"] = encoding;
      headers["content-length"] = String(body.byteLength);
      res.writeHead(200, headers);
      res.end(req.method === "HEAD" ? undefined : body);
    },
  };
}
