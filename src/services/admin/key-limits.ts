import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import type { ApiKeyPatch } from "../../store/store.ts";
import { invalidField } from "./key-times.ts";

/** A cap in micros: whole, from 0 (a key that may spend nothing) to the largest safe integer. */
export const capSchema = z.bigint().min(0n).max(BigInt(Number.MAX_SAFE_INTEGER));
/** A tokens-per-minute limit: at least one token (no limit is "unset", not 0). */
const tpmSchema = z.number().int().min(1).max(4_294_967_295);

/** A key's own limits as a request sets them (`CreateApiKeyRequest`, `UpdateApiKeyRequest`). */
interface LimitFields {
  spendCapUsdMicros?: bigint | undefined;
  tokensPerMinute?: number | undefined;
}

/** The fields `update_mask` may name, by their proto names. */
const MASKABLE = {
  spend_cap_usd_micros: "spendCapUsdMicros",
  tokens_per_minute: "tokensPerMinute",
} as const satisfies Record<string, keyof ApiKeyPatch>;

/**
 * A request's key limits, checked (a cap in whole micros from 0, a token limit from 1), or 400
 * `invalid_argument` naming the field; unset stays unset. `CreateApiKey` sets them as they are.
 */
export function keyLimitsOf(req: LimitFields): { spendCapUsdMicros?: number; tokensPerMinute?: number } {
  const out: { spendCapUsdMicros?: number; tokensPerMinute?: number } = {};
  if (req.spendCapUsdMicros !== undefined) {
    const cap = capSchema.safeParse(req.spendCapUsdMicros);
    if (!cap.success) throw invalidField("spend_cap_usd_micros", "must be a whole number of micros >= 0");
    out.spendCapUsdMicros = Number(cap.data);
  }
  if (req.tokensPerMinute !== undefined) {
    if (!tpmSchema.safeParse(req.tokensPerMinute).success) throw invalidField("tokens_per_minute", "must be >= 1");
    out.tokensPerMinute = req.tokensPerMinute;
  }
  return out;
}

/**
 * The change an `UpdateApiKey` asks for, AIP-134 style: without a mask, the fields that are set;
 * with one, the fields it names (by proto name, or "*" for all), a named field left unset being
 * removed. An unknown path, or a request that changes nothing, is 400 `invalid_argument`.
 */
export function keyPatchOf(req: LimitFields & { updateMask?: FieldMask | undefined }): ApiKeyPatch {
  const values = keyLimitsOf(req);
  // Proto names, as AIP-161 has them; lowerCamel too, as a JavaScript caller may write them.
  const paths = (req.updateMask?.paths ?? []).map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
  const named = paths.includes("*") ? Object.keys(MASKABLE) : paths;
  const patch: ApiKeyPatch = {};
  for (const path of named) {
    if (!Object.hasOwn(MASKABLE, path))
      throw invalidField("update_mask", `unknown path "${path.slice(0, 64)}"; use ${Object.keys(MASKABLE).join(", ")}`);
    const field = MASKABLE[path as keyof typeof MASKABLE];
    patch[field] = values[field] ?? null;
  }
  if (paths.length === 0) Object.assign(patch, values);
  if (Object.keys(patch).length === 0)
    throw invalidField("update_mask", "nothing to change: set spend_cap_usd_micros or tokens_per_minute, or name them");
  return patch;
}
