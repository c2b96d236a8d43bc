import { CATALOGUE, type Entry, type Reason } from "./catalogue.ts";

/**
 * The HTTP bodies of catalogue errors and the links they carry. The links are built here from
 * one public base URL, so every `docs_url` lands on the page Sluice serves for its code and every
 * `resolution_url` on the console page where the fix is made.
 */

/** Where Sluice is reached from outside (`SLUICE_PUBLIC_URL`): the base of every error link. */
export interface ErrorLinks {
  /** An absolute URL with no trailing slash, such as `https://llm.example.com`. */
  publicUrl: string;
}

/** The documentation page of a code, served by Sluice at `/docs/errors/<code>`. */
export function docsUrlOf(reason: Reason, links: ErrorLinks): string {
  return `${links.publicUrl}/docs/errors/${reason}`;
}

/** The console, served by Sluice at `/console`. */
export function portalUrlOf(links: ErrorLinks): string {
  return `${links.publicUrl}/console`;
}

/** The console page where a structured error's recovery is done, if the code has one. */
export function resolutionUrlOf(reason: Reason, links: ErrorLinks): string | undefined {
  const envelope: Entry["envelope"] = CATALOGUE[reason].envelope;
  return envelope.kind === "structured" ? `${portalUrlOf(links)}/${envelope.resolution}` : undefined;
}

/**
 * The JSON body an HTTP caller gets for a reason: `{detail}` for 400/401/404, the structured
 * `{error}` envelope for 402, 413, 429 and 5xx.
 */
export function errorBody(reason: Reason, links: ErrorLinks, message?: string): object | string {
  const entry: Entry = CATALOGUE[reason];
  if (entry.envelope.kind === "plain") return entry.envelope.text;
  if (entry.envelope.kind === "detail") return { detail: reason };
  return {
    error: {
      type: entry.envelope.type,
      code: reason,
      reason,
      message: message ?? entry.message,
      docs_url: docsUrlOf(reason, links),
      resolution_url: resolutionUrlOf(reason, links),
      portal_url: portalUrlOf(links),
    },
  };
}

/**
 * The `data:` payload of the spend-cap abort event of a stream. `message` is the occurrence's
 * own (a temporary refusal says so), else the catalogue's; SPEC fixes the three fields.
 */
export function streamAbortPayload(reason: Reason, links: ErrorLinks, message?: string): object {
  return { code: reason, message: message ?? CATALOGUE[reason].message, docs_url: docsUrlOf(reason, links) };
}
