import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { sluiceError } from "../errors/catalogue.ts";
import { InvalidPageTokenError } from "../store/page-token.ts";
import type { Store, UsagePage, UsageRecordRow } from "../store/store.ts";

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000;

/**
 * A request's `page_size` by AIP-158: 0 is the default of 50, more than 1,000 is 1,000, and a
 * negative one is 400 `invalid_argument`. Every listing of Sluice pages the same way.
 */
export function pageSizeOf(pageSize: number): number {
  if (pageSize < 0)
    throw sluiceError("invalid_argument", {
      message: "page_size must not be negative",
      metadata: { field: "page_size" },
    });
  return Math.min(pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
}

/** One page of an account's usage records, with AIP-158 page-size rules and token errors. */
export async function listUsagePage(
  store: Store,
  accountId: string,
  pageSize: number,
  pageToken: string,
): Promise<UsagePage> {
  const size = pageSizeOf(pageSize);
  try {
    return await store.listUsageRecords({ accountId, pageSize: size, pageToken });
  } catch (err) {
    if (err instanceof InvalidPageTokenError)
      throw sluiceError("invalid_argument", { message: "invalid page_token", metadata: { field: "page_token" } });
    throw err;
  }
}

/** A stored record in the shape both the Billing and the Admin `UsageRecord` share. */
export function usageRecordToProto(r: UsageRecordRow) {
  return {
    id: r.id,
    accountId: r.accountId,
    apiKeyId: r.apiKeyId,
    model: r.model,
    promptTokens: BigInt(r.promptTokens),
    completionTokens: BigInt(r.completionTokens),
    costUsdMicros: BigInt(r.costUsdMicros),
    createTime: timestampFromMs(r.createTimeMs),
  };
}
