import type { Client } from "@connectrpc/connect";
import fc from "fast-check";
import type { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { generateApiKey } from "../../src/services/auth/api-key.ts";
import { authHeader, type Secrets } from "./auth.ts";
import { caseArb, describeCase, type Family, type FuzzCase } from "./case-arbitraries.ts";
import { checkConnectReply, checkDropped, checkEdgeReply, checkNodeRefusal, Mismatch, signatureOf } from "./checks.ts";
import { renderRaw, rawExpect } from "./raw-cases.ts";
import { connectChatOutcome, decodeConnect, edgeChatOutcome, meOutcome } from "./request-oracle.ts";
import type { Outcome } from "./rules-oracle.ts";
import { fetchExchange, H2Client, rawExchange, type Reply } from "./transports.ts";

/**
 * Runs fuzz cases against a running Sluice: sets up the accounts and keys the cases refer to,
 * sends each case, checks its one documented answer, and watches the process itself (no
 * unhandled rejection or uncaught exception, `/healthz` still answering). Shared by the vitest
 * sample and `npm run fuzz`.
 */

/** A running app the fuzzer can reach, with the keys its cases use. */
export interface FuzzTarget {
  edgeUrl: string;
  coreUrl: string;
  secrets: Secrets;
  /** The accounts behind the keys, which `GET /v1/me` must name. */
  accountIds: { good: string; unonboarded: string };
  h2: H2Client;
}

/**
 * Creates the accounts and keys of DESIGN's check order: a good key with a rate limit the
 * fuzzer never reaches and a cap it never spends, a key whose one request is used up, a key
 * of an account that has not finished onboarding, a revoked key and a never-issued one.
 */
export async function prepareTarget(
  app: { edgeUrl: string; coreUrl: string },
  admin: Client<typeof AdminService>,
  adminHeaders: Record<string, string>,
): Promise<FuzzTarget> {
  const opts = { headers: adminHeaders };
  const account = async (onboardingComplete: boolean) => {
    const { account: a } = await admin.createAccount(
      { onboardingComplete, ...(onboardingComplete && { spendCapUsdMicros: 1_000_000_000_000_000n }) },
      opts,
    );
    if (!a) throw new Error("no account");
    return a.id;
  };
  const key = async (accountId: string, rateLimitRps: number, burst: number) =>
    admin.createApiKey({ accountId, rateLimitRps, burst }, opts);
  const good = await account(true);
  const unonboarded = await account(false);
  const revoked = await key(good, 10, 10);
  await admin.revokeApiKey({ apiKeyId: revoked.apiKey?.id ?? "" }, opts);
  const secrets: Secrets = {
    good: (await key(good, 1_000_000, 1_000_000)).secret,
    limited: (await key(good, 0.0001, 1)).secret,
    unonboarded: (await key(unonboarded, 1_000_000, 1_000_000)).secret,
    revoked: revoked.secret,
    unknown: generateApiKey(),
  };
  // Spend the limited key's only request, so every later one is over the limit.
  const first = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${secrets.limited}` } });
  if (first.status !== 200) throw new Error(`could not spend the limited key: ${first.status}`);
  return {
    edgeUrl: app.edgeUrl,
    coreUrl: app.coreUrl,
    secrets,
    accountIds: { good, unonboarded },
    h2: new H2Client(app.coreUrl),
  };
}

/** Records what the process reports that no request did: unhandled rejections, uncaught exceptions. */
export function installProcessGuard(): { problems: string[]; dispose(): void } {
  const problems: string[] = [];
  const onRejection = (reason: unknown) =>
    problems.push(`unhandledRejection: ${reason instanceof Error ? reason.stack : String(reason)}`);
  const onException = (err: Error) => problems.push(`uncaughtException: ${err.stack ?? err.message}`);
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return {
    problems,
    dispose() {
      process.off("unhandledRejection", onRejection);
      process.off("uncaughtException", onException);
    },
  };
}

const headersOf = (auth: string | undefined, requestId: string | undefined, extra: Record<string, string> = {}) => ({
  ...extra,
  ...(auth !== undefined && { authorization: auth }),
  ...(requestId !== undefined && { "x-request-id": requestId }),
});

/** Sends one case and checks its answer; returns a short signature of the answer for the summary. */
export async function runCase(t: FuzzTarget, c: FuzzCase): Promise<string> {
  const auth = authHeader(c.auth, t.secrets);
  if (c.kind === "edge-raw") {
    const { head, body } = renderRaw(c, t.secrets);
    const expect = rawExpect(c, head);
    const raw = await rawExchange(Number(new URL(t.edgeUrl).port), { head, body, writes: c.writes, finish: c.finish });
    if (expect.type === "node") {
      checkNodeRefusal(expect.status, raw);
      return `node ${expect.status}`;
    }
    if (expect.type === "dropped") {
      checkDropped(raw);
      return "node dropped";
    }
    const [reply, ...more] = raw.replies;
    if (!reply)
      throw new Mismatch(
        `no reply${raw.timedOut ? " (timed out)" : ""}; ` +
          `got ${JSON.stringify(raw.rest.toString("latin1").slice(0, 300))}`,
      );
    if (more.length > 0) throw new Mismatch(`more than one reply: ${more.map(signatureOf).join(", ")}`);
    checkEdgeReply(expect.outcome, reply, {
      requestId: expect.requestId,
      path: "/v1/chat/completions",
      accountIds: t.accountIds,
    });
    return signatureOf(reply);
  }
  let reply: Reply;
  let outcome: Outcome;
  if (c.kind === "edge-route") {
    const route = (c.path.split("?")[0] ?? "").replace(/(.)\/+$/, "$1");
    const allowed = route === "/v1/me" ? "GET" : route === "/v1/chat/completions" ? "POST" : undefined;
    outcome =
      allowed === undefined
        ? { kind: "error", reason: "not_found" }
        : c.method !== allowed
          ? { kind: "error", reason: "method_not_allowed" }
          : meOutcome(c.auth.key);
    reply = await fetchExchange(`${t.edgeUrl}${c.path}`, { method: c.method, headers: headersOf(auth, c.requestId) });
    checkEdgeReply(outcome, reply, { requestId: c.requestId, path: route, accountIds: t.accountIds });
    return signatureOf(reply);
  }
  if (!("format" in c)) {
    outcome = edgeChatOutcome(c.auth.key, c.body);
    reply = await fetchExchange(`${t.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: headersOf(auth, c.requestId, { "content-type": "application/json" }),
      body: c.body,
    });
    checkEdgeReply(outcome, reply, { requestId: c.requestId, path: "/v1/chat/completions", accountIds: t.accountIds });
    return signatureOf(reply);
  }
  // HTTP/2 forbids a field value that starts or ends with whitespace (RFC 9113 8.2.1); Node's
  // HTTP/2 server drops such a field, so that Authorization is as good as missing.
  const dropped = auth !== undefined && /^[ \t]|[ \t]$/.test(auth);
  outcome = connectChatOutcome(dropped ? "missing" : c.auth.key, c.format, c.body);
  const contentType = c.format === "json" ? "application/json" : "application/proto";
  reply = await t.h2.request(
    "/sluice.completion.v1.CompletionService/CreateChatCompletion",
    headersOf(auth, undefined, { "content-type": contentType, "connect-protocol-version": "1" }),
    c.body,
  );
  checkConnectReply(outcome, c.format, reply);
  return `connect ${signatureOf(reply)}`;
}

/** `/healthz` must answer 200 after a batch: the process survived it. */
export async function checkAlive(t: FuzzTarget): Promise<void> {
  const res = await fetch(`${t.edgeUrl}/healthz`, { signal: AbortSignal.timeout(5000) });
  const body = await res.text();
  if (res.status !== 200 || body !== '{"status":"ok"}') throw new Mismatch(`/healthz answered ${res.status} ${body}`);
}

/** Counts of a run, for the summary. */
export interface FuzzStats {
  done: number;
  failures: Array<{ index: number; kind: string; message: string; description: string }>;
  byKind: Map<string, number>;
  byAnswer: Map<string, number>;
  /** Milliseconds spent per kind, to see where a run's time goes. */
  msByKind: Map<string, number>;
}

const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

/**
 * The property: every case gets its documented answer, the process reports nothing unhandled,
 * and `/healthz` answers every `aliveEvery` cases. With `keepGoing`, a failure is recorded in
 * `stats` and the run continues (the survey of `npm run fuzz`); without it, the property
 * fails and fast-check shrinks.
 */
export function fuzzProperty(
  t: FuzzTarget,
  family: Family,
  guard: { problems: string[] },
  stats: FuzzStats,
  options: { keepGoing: boolean; aliveEvery?: number; onCase?: () => void; only?: (c: FuzzCase) => boolean },
) {
  const aliveEvery = options.aliveEvery ?? 100;
  const cases = options.only ? caseArb(family).filter(options.only) : caseArb(family);
  return fc.asyncProperty(cases, async (c) => {
    const index = stats.done;
    const before = guard.problems.length;
    const kind = c.kind === "edge-raw" ? `${c.kind}/${c.sub}` : c.kind;
    const started = performance.now();
    try {
      bump(stats.byKind, kind);
      bump(stats.byAnswer, await runCase(t, c));
      if (guard.problems.length > before)
        throw new Mismatch(`the process reported: ${guard.problems.slice(before).join("\n")}`);
      if ((index + 1) % aliveEvery === 0) await checkAlive(t);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (!options.keepGoing) throw err;
      stats.failures.push({ index, kind: c.kind, message, description: describeCase(c) });
    } finally {
      stats.msByKind.set(kind, (stats.msByKind.get(kind) ?? 0) + performance.now() - started);
      stats.done += 1;
      options.onCase?.();
    }
  });
}

/** Whether a case is a Connect call whose body decodes as a `CreateChatCompletionRequest`. */
export const decodableOnCore = (c: FuzzCase): boolean =>
  "format" in c && !("refused" in decodeConnect(c.format, c.body));

/** Fresh, empty counts. */
export const newStats = (): FuzzStats => ({
  done: 0,
  failures: [],
  byKind: new Map(),
  byAnswer: new Map(),
  msByKind: new Map(),
});
