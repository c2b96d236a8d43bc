import { createHash } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { Code } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { CATALOGUE, ERROR_DOMAIN, type Entry, type Reason } from "../errors/catalogue.ts";
import { errorBody, type ErrorLinks, resolutionUrlOf } from "../errors/envelope.ts";
import { retryHeaders } from "../errors/http.ts";

/**
 * The pages behind every `docs_url`: `/docs/errors/<code>` for each catalogue code and an
 * index at `/docs/errors`, rendered once from the catalogue, so a new code has its page the
 * moment it exists and no page can describe a code that is gone.
 */

const STYLE = `
:root{color-scheme:light dark;--fg:#1c1e21;--bg:#fff;--muted:#4d5561;--line:#d5d9de;--code:#f2f4f7;--link:#0b57d0}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--bg:#15171a;--muted:#b0b6bf;--line:#3a3f46;--code:#23262b;
--link:#8ab4f8}}
body{font:16px/1.55 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:0}
main{max-width:52rem;margin:0 auto;padding:1.5rem 1rem 3rem}
a{color:var(--link)}
code,pre{font:14px/1.5 ui-monospace,monospace;background:var(--code);border-radius:4px}
code{padding:0 .25rem}pre{padding:.75rem 1rem;overflow-x:auto}h1 code{font-size:1.75rem;background:none;padding:0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line)}
.muted{color:var(--muted)}dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}
.scroll{overflow-x:auto}`;

/** The page's only style, allowed by its hash: the pages run no script at all. */
const CSP =
  `default-src 'none'; style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'; ` +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Catalogue prose marks code with backticks. */
function prose(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, "<code>$1</code>");
}

/** `resource_exhausted` → `RESOURCE_EXHAUSTED`, as gRPC writes its codes. */
function grpcName(code: Code): string {
  return codeToString(code).toUpperCase();
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title>
<style>${STYLE}</style></head><body><main>${body}</main></body></html>`;
}

/** The HTTP response a caller sees for a code, written out as an example. */
function exampleResponse(reason: Reason, entry: Entry, links: ErrorLinks): string {
  const body = errorBody(reason, links);
  const text = typeof body === "string" ? body : JSON.stringify(body, null, 2);
  const type = typeof body === "string" ? "text/plain; charset=utf-8" : "application/json";
  const headers = [`HTTP/1.1 ${entry.http}`, `content-type: ${type}`, "x-request-id: 4bf92f3577b34da6a3ce929d0e0e4736"];
  if (entry.retryAfter)
    headers.push(...Object.entries(retryHeaders(30_000)).map(([name, value]) => `${name}: ${value}`));
  return `${headers.join("\n")}\n\n${text}`;
}

function codePage(reason: Reason, links: ErrorLinks): string {
  const entry: Entry = CATALOGUE[reason];
  const resolution = resolutionUrlOf(reason, links);
  const info = JSON.stringify({ reason, domain: ERROR_DOMAIN, metadata: {} }, null, 2);
  const http = entry.http === 499 ? "499 (logged only; never sent)" : String(entry.http);
  return page(
    `${reason} · Sluice errors`,
    `<p><a href="/docs/errors">All error codes</a></p>
<h1><code>${reason}</code></h1>
<dl><dt>HTTP status</dt><dd>${http}</dd><dt>gRPC code</dt><dd><code>${grpcName(entry.grpc)}</code></dd>
<dt>Message</dt><dd>${escapeHtml(entry.message)}</dd></dl>
<h2>Cause</h2><p>${prose(entry.cause)}</p>
<h2>Recovery</h2><p>${prose(entry.recovery)}</p>
${resolution ? `<p><a href="${escapeHtml(resolution)}">Open the console page where this is fixed</a></p>` : ""}
<h2>Example response</h2><pre>${escapeHtml(exampleResponse(reason, entry, links))}</pre>
<h2>Over gRPC and Connect</h2>
<p>Status <code>${grpcName(entry.grpc)}</code> with one <code>google.rpc.ErrorInfo</code> detail${
      entry.retryAfter ? " and a <code>google.rpc.RetryInfo</code> giving the delay" : ""
    }:</p><pre>${escapeHtml(info)}</pre>
<p class="muted">Branch on the code (<code>error.code</code>, <code>detail</code> or <code>ErrorInfo.reason</code>),
never on the message.</p>`,
  );
}

function indexPage(): string {
  const rows = (Object.keys(CATALOGUE) as Reason[]).map((reason) => {
    const entry: Entry = CATALOGUE[reason];
    return `<tr><td><a href="/docs/errors/${reason}"><code>${reason}</code></a></td><td>${entry.http}</td>
<td>${prose(entry.cause)}</td></tr>`;
  });
  return page(
    "Error codes · Sluice",
    `<h1>Error codes</h1>
<p>Every error Sluice returns carries one of these codes: in <code>detail</code> or <code>error.code</code> over HTTP,
in <code>ErrorInfo.reason</code> over gRPC and Connect. <a href="/console">Open the console</a>.</p>
<div class="scroll"><table><thead><tr><th scope="col">Code</th><th scope="col">HTTP</th><th scope="col">Cause</th></tr>
</thead><tbody>${rows.join("\n")}</tbody></table></div>`,
  );
}

/** Serves the error pages; built once per process from the catalogue and the public URL. */
export interface ErrorDocs {
  /** Answers a path under `/docs/errors`. */
  serve(res: ServerResponse, path: string, head: boolean): void;
}

/** Renders every page at start, so serving one is a map lookup. */
export function createErrorDocs(links: ErrorLinks): ErrorDocs {
  const pages = new Map<string, string>([["/docs/errors", indexPage()]]);
  for (const reason of Object.keys(CATALOGUE) as Reason[]) pages.set(`/docs/errors/${reason}`, codePage(reason, links));
  const missing = page(
    "Unknown error code · Sluice",
    `<h1>Unknown error code</h1><p>Sluice has no such code. <a href="/docs/errors">See every code</a>.</p>`,
  );
  return {
    serve(res, path, head) {
      const html = pages.get(path.replace(/\/+$/, ""));
      res.writeHead(html ? 200 : 404, {
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-cache",
      });
      res.end(head ? undefined : (html ?? missing));
    },
  };
}
