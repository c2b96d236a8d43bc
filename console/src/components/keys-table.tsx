/**
 * API keys as a table: what a key is recognised by (its prefix), its rate and token limits, its own spend cap
 * (if any) with what it spent this month, whether it still works and until when (its expiry, and a replaced
 * secret's grace period after a rotation). Secrets are never listed; the operator's page adds rotate and
 * revoke actions per row.
 */
import type { ComponentChildren } from "preact";
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import { formatUsd } from "../money.ts";
import { formatTime } from "../time.ts";
import { TableWrap } from "./table-wrap.tsx";

/** The fields of an `ApiKey` the table shows; the holder's and the operator's messages both fit. */
export interface KeyRow {
  id: string;
  prefix: string;
  rateLimitRps: number;
  burst: number;
  revoked: boolean;
  createTime?: Timestamp | undefined;
  /** Unset: the key never expires. */
  expireTime?: Timestamp | undefined;
  /** The secret the last rotation replaced, while it still works (empty otherwise), and until when. */
  previousPrefix?: string;
  previousExpireTime?: Timestamp | undefined;
  /** The key's own monthly cap, besides its account's; unset, only the account's applies. */
  spendCapUsdMicros?: bigint | undefined;
  /** What the key's calls were charged this period, and what its calls in flight hold. */
  spentUsdMicros?: bigint;
  reservedUsdMicros?: bigint;
  /** Unset: no token limit. */
  tokensPerMinute?: number | undefined;
}

/** A key's spend this period against its own cap, if it has one. */
function KeySpend({ apiKey }: { apiKey: KeyRow }) {
  const held = apiKey.reservedUsdMicros ?? 0n;
  return (
    <>
      {formatUsd(apiKey.spentUsdMicros ?? 0n)}
      {held > 0n && <span class="hint"> (+{formatUsd(held)} held)</span>}
    </>
  );
}

/** Whether the key still works, as a badge: revoked and expired keys get 401 invalid_api_key. */
function State({ apiKey }: { apiKey: KeyRow }) {
  if (apiKey.revoked) return <span class="badge revoked">Revoked</span>;
  if (apiKey.expireTime && timestampMs(apiKey.expireTime) <= Date.now())
    return <span class="badge expired">Expired</span>;
  return <span class="badge ok">Active</span>;
}

/** The keys, oldest first as the RPCs list them; `action` renders an extra cell per key. */
export function KeysTable(props: { keys: readonly KeyRow[]; action?: (key: KeyRow) => ComponentChildren }) {
  const { keys, action } = props;
  return (
    <TableWrap label="Keys table">
      <table class="keys">
        <caption class="visually-hidden">API keys, oldest first</caption>
        <thead>
          <tr>
            <th scope="col">Prefix</th>
            <th scope="col" class="num">
              Rate limit
            </th>
            <th scope="col" class="num">
              Burst
            </th>
            <th scope="col">State</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">Key id</th>
            <th scope="col" class="num">
              Tokens/min
            </th>
            <th scope="col" class="num">
              Key cap
            </th>
            <th scope="col" class="num">
              Spent this month
            </th>
            {action && <th scope="col">Action</th>}
          </tr>
        </thead>
        <tbody>
          {keys.map((k) => (
            <tr key={k.id} data-key-id={k.id}>
              <td class="nowrap">
                <code>{k.prefix}…</code>
              </td>
              <td class="num nowrap">{k.rateLimitRps.toLocaleString("en-US")} rps</td>
              <td class="num">{k.burst.toLocaleString("en-US")}</td>
              <td>
                <State apiKey={k} />
                {k.previousPrefix && !k.revoked && (
                  <p class="hint" data-previous-prefix={k.previousPrefix}>
                    Old secret <code>{k.previousPrefix}…</code> works until {formatTime(k.previousExpireTime)}
                  </p>
                )}
              </td>
              <td class="nowrap">{formatTime(k.createTime)}</td>
              <td class="nowrap">{k.expireTime ? formatTime(k.expireTime) : "Never"}</td>
              <td>
                <code>{k.id}</code>
              </td>
              <td class="num nowrap">{k.tokensPerMinute?.toLocaleString("en-US") ?? "No limit"}</td>
              <td class="num nowrap" data-key-cap>
                {k.spendCapUsdMicros === undefined ? "Account's" : formatUsd(k.spendCapUsdMicros)}
              </td>
              <td class="num nowrap" data-key-spent>
                <KeySpend apiKey={k} />
              </td>
              {action && <td>{action(k)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}
