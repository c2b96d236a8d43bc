import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { sluiceError } from "../errors/catalogue.ts";
import { InvalidPageTokenError } from "../store/page-token.ts";
import type { Store, UsagePage, UsageRecordRow } from "../store/store.ts";

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000;

/** One page of an account's usage records, with AIP-158 page-size rules and token errors. */
export async function listUsagePage(
  store: Store,
  accountId: string,
  pageSize: number,
  pageToken: string,
): Promise<UsagePage> {
  if (pageSize < 0)
    throw sluiceError("invalid_argument", {
      message: "page_size must not be negative",
      metadata: { field: "page_size" },
    });
  const size = Math.min(pageSize || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
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
