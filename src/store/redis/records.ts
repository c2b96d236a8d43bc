import type { AccountPatch, AccountRecord, ApiKeyRecord, UsageRecordRow } from "../store.ts";

/** A flat field-value list (HGETALL in a script, a stream entry's fields) as a record; null is empty. */
export function recordOf(fields: readonly string[] | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; fields && i + 1 < fields.length; i += 2) out[fields[i] ?? ""] = fields[i + 1] ?? "";
  return out;
}

/** A Redis reply read as a number; nil (a missing key or field) is 0. */
export const num = (value: unknown): number => Number(value ?? 0);

/**
 * Record <-> Redis hash field mapping. Hashes hold strings only; a missing `cap` field is
 * "no cap", which the Lua scripts read as 0, and a patch writes only the fields it sets.
 */
export function accountFields(
  a: AccountPatch & Partial<Pick<AccountRecord, "email" | "createTimeMs">>,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (a.spendCapUsdMicros !== undefined) out.cap = String(a.spendCapUsdMicros);
  if (a.onboardingComplete !== undefined) out.onboarded = a.onboardingComplete ? "1" : "0";
  if (a.paymentStatus !== undefined) out.payment = a.paymentStatus;
  if (a.subscriptionStatus !== undefined) out.subscription = a.subscriptionStatus;
  if (a.email !== undefined) out.email = a.email;
  if (a.createTimeMs !== undefined) out.created = String(a.createTimeMs);
  return out;
}

export function parseAccount(id: string, h: Record<string, string>): AccountRecord | undefined {
  if (h.created === undefined) return undefined;
  return {
    id,
    ...(h.email !== undefined && { email: h.email }),
    ...(h.cap && { spendCapUsdMicros: Number(h.cap) }),
    onboardingComplete: h.onboarded === "1",
    paymentStatus: h.payment === "failed" ? "failed" : "ok",
    subscriptionStatus: h.subscription === "canceled" ? "canceled" : "active",
    createTimeMs: Number(h.created),
  };
}

/**
 * A key as hash fields. Its own cap (`cap`, which the billing scripts read), its token limit
 * (`tpm`), the expiry (`expires`) and the replaced secret (`prev_hash`, `prev_prefix`,
 * `prev_expires`, written by the rotation script) are absent when unset; keys stored before they
 * existed read as never expiring, never rotated and without limits of their own.
 */
export function apiKeyFields(k: ApiKeyRecord): Record<string, string> {
  return {
    account: k.accountId,
    prefix: k.prefix,
    hash: k.hash,
    rps: String(k.rateLimitRps),
    burst: String(k.burst),
    revoked: k.revoked ? "1" : "0",
    created: String(k.createTimeMs),
    ...(k.expireTimeMs !== undefined && { expires: String(k.expireTimeMs) }),
    ...(k.spendCapUsdMicros !== undefined && { cap: String(k.spendCapUsdMicros) }),
    ...(k.tokensPerMinute !== undefined && { tpm: String(k.tokensPerMinute) }),
    ...(k.previous && {
      prev_hash: k.previous.hash,
      prev_prefix: k.previous.prefix,
      prev_expires: String(k.previous.expireTimeMs),
    }),
  };
}

export function parseApiKey(id: string, h: Record<string, string>): ApiKeyRecord | undefined {
  if (h.hash === undefined || h.account === undefined) return undefined;
  return {
    id,
    accountId: h.account,
    prefix: h.prefix ?? "",
    hash: h.hash,
    rateLimitRps: Number(h.rps),
    burst: Number(h.burst),
    revoked: h.revoked === "1",
    createTimeMs: Number(h.created),
    ...(h.expires && { expireTimeMs: Number(h.expires) }),
    ...(h.cap && { spendCapUsdMicros: Number(h.cap) }),
    ...(h.tpm && { tokensPerMinute: Number(h.tpm) }),
    ...(h.prev_hash && {
      previous: { hash: h.prev_hash, prefix: h.prev_prefix ?? "", expireTimeMs: Number(h.prev_expires) },
    }),
  };
}

/** A usage record as stream entry fields (name, value, name, value, ...). */
export function usageFields(r: UsageRecordRow): string[] {
  return [
    "id",
    r.id,
    "key",
    r.apiKeyId,
    "model",
    r.model,
    "prompt",
    String(r.promptTokens),
    "completion",
    String(r.completionTokens),
    "cost",
    String(r.costUsdMicros),
    "created",
    String(r.createTimeMs),
  ];
}

export function parseUsage(accountId: string, fields: string[]): UsageRecordRow {
  const f = recordOf(fields);
  return {
    id: f.id ?? "",
    accountId,
    apiKeyId: f.key ?? "",
    model: f.model ?? "",
    promptTokens: Number(f.prompt),
    completionTokens: Number(f.completion),
    costUsdMicros: Number(f.cost),
    createTimeMs: Number(f.created),
  };
}
