import type { Client } from "@connectrpc/connect";
import type { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";

/**
 * An Admin client and the headers its calls carry. A `TestApp` is one, and so is an `adminOf`
 * handle on a child process, so the same ledger readers serve the in-process and the
 * multi-process suites.
 */
export interface AdminAccess {
  admin: Client<typeof AdminService>;
  adminHeaders: Record<string, string>;
}

/** An account's money in the current period, from the Admin API: what billing assertions compare. */
export async function balanceOf(
  access: AdminAccess,
  accountId: string,
): Promise<{ spent: bigint; reserved: bigint; cap: bigint | undefined }> {
  const { account } = await access.admin.getAccount({ accountId }, { headers: access.adminHeaders });
  if (!account) throw new Error("no account");
  return { spent: account.spentUsdMicros, reserved: account.reservedUsdMicros, cap: account.spendCapUsdMicros };
}

/** Every usage record of an account, following page tokens, so a test counts all of them and not a first page. */
export async function usageRecordsOf(access: AdminAccess, accountId: string) {
  const out = [];
  let pageToken = "";
  do {
    const page = await access.admin.listUsageRecords(
      { accountId, pageSize: 1000, pageToken },
      { headers: access.adminHeaders },
    );
    out.push(...page.usageRecords);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return out;
}
