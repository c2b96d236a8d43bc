/**
 * API keys as a table: what a key is recognised by (its prefix), its rate limit and whether it still works.
 * Secrets are never listed; the operator's page adds a revoke action per row.
 */
import type { ComponentChildren } from "preact";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
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
            <th scope="col">Key id</th>
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
              <td>{k.revoked ? <span class="badge revoked">Revoked</span> : <span class="badge ok">Active</span>}</td>
              <td class="nowrap">{formatTime(k.createTime)}</td>
              <td>
                <code>{k.id}</code>
              </td>
              {action && <td>{action(k)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}
