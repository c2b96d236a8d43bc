import { Redis } from "ioredis";
import type { Admin, SoakAccount } from "./accounts.ts";
import { NOT_BILLED_KINDS, UNKNOWN_KINDS, type CallResult } from "./outcomes.ts";

/** One broken invariant: which account (-1: the cluster as a whole), which check, and the evidence. */
export interface Breach {
  account: number;
  check: string;
  message: string;
}

/** The ledger of one account at the end, and what the clients of its calls were told. */
export interface AccountFigures {
  index: number;
  id: string;
  period: string;
  cap: bigint;
  spent: bigint;
  reserved: bigint;
  /** Live holds left in Redis (`...:resv` HASH length). */
  holds: number;
  records: number;
  recordsSum: bigint;
  partials: number;
  partialsSum: bigint;
  /** The older `...:partial` counter, or undefined when absent. */
  partialCounter: bigint | undefined;
  /** Whether the partials HASH exists at all (the layout is being introduced). */
  partialsHash: boolean;
  toldSuccess: number;
  toldAbort: number;
  toldNotBilled: number;
  unknownCalls: number;
  /** Records whose id no client saw as a success. */
  recordsNotSeenAsSuccess: number;
  /** Records and partials whose id no client saw at all. */
  unseenCharges: number;
}

const sum = (xs: Iterable<bigint>) => {
  let s = 0n;
  for (const x of xs) s += x;
  return s;
};
const show = (ids: string[]) => ids.slice(0, 5).join(", ") + (ids.length > 5 ? `, ... (${ids.length})` : "");

/** Ids seen by clients of one account, by what they were told. */
function idsOf(calls: CallResult[]) {
  const by = (pred: (c: CallResult) => boolean) =>
    calls.filter((c) => pred(c) && c.id !== undefined).map((c) => c.id as string);
  return {
    success: by((c) => c.told === "success"),
    abort: by((c) => c.told === "spend-cap-abort"),
    notBilled: by((c) => NOT_BILLED_KINDS.has(c.told)),
    all: new Set(by(() => true)),
    unknown: calls.filter((c) => UNKNOWN_KINDS.has(c.told) || c.told === "malformed"),
  };
}

/** Duplicates in a list of ids. */
function duplicates(ids: string[]): string[] {
  const seen = new Set<string>();
  const dup = new Set<string>();
  for (const id of ids) (seen.has(id) ? dup : seen).add(id);
  return [...dup];
}

/**
 * Reads each account's ledger (Admin API for spent, reserved, cap and usage records; Redis
 * directly for the per-id partial charges and the live holds) and checks it against what
 * the clients were told, by completion id. Run only once traffic has stopped, faults are
 * healed and the reservation TTL has passed, so nothing may still be held.
 */
export async function checkLedger(
  admin: Admin,
  redisUrl: string,
  accounts: SoakAccount[],
  calls: CallResult[],
): Promise<{ figures: AccountFigures[]; breaches: Breach[] }> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3, lazyConnect: true });
  await redis.connect();
  const figures: AccountFigures[] = [];
  const breaches: Breach[] = [];
  try {
    for (const a of accounts) {
      const breach = (check: string, message: string) => breaches.push({ account: a.index, check, message });
      const ledger = await admin.ledger(a.id);
      const base = `sluice:{a:${a.id}}:p:${ledger.period}`;
      const [partialsRaw, counterRaw, holdsRaw] = await Promise.all([
        redis.hgetall(`${base}:partials`),
        redis.get(`${base}:partial`),
        redis.hgetall(`${base}:resv`),
      ]);
      const holdEntries = Object.entries(holdsRaw);
      const holds = holdEntries.length;
      const partials = new Map(Object.entries(partialsRaw).map(([id, v]) => [id, BigInt(v)]));
      const partialCounter = counterRaw === null ? undefined : BigInt(counterRaw);
      const recordIds = ledger.records.map((r) => r.id);
      const recordSet = new Set(recordIds);
      const recordsSum = sum(ledger.records.map((r) => r.cost));
      const partialsSum = sum(partials.values());
      const mine = calls.filter((c) => c.accountIndex === a.index);
      const seen = idsOf(mine);

      // Money: spent is exactly the records plus the partial charges; nothing held; within the cap.
      if (ledger.spent !== recordsSum + partialsSum) {
        const legacy = partialCounter === undefined ? "" : `; older :partial counter ${partialCounter}`;
        const noPartials = partials.size === 0 ? "; partials HASH absent or empty" : "";
        breach(
          "spent = records + partials",
          `spent ${ledger.spent} != records ${recordsSum} + partials ${partialsSum} ` +
            `(off by ${ledger.spent - recordsSum - partialsSum}${noPartials}${legacy})`,
        );
      }
      if (partials.size > 0 && partialCounter !== undefined && partialCounter !== partialsSum) {
        breach(
          "partial counter = sum of partials",
          `:partial counter ${partialCounter} != sum of the partials HASH ${partialsSum}`,
        );
      }
      const toldOf = new Map(
        mine.filter((c) => c.id !== undefined).map((c) => [c.id, `${c.told} (${c.via}: ${c.detail})`]),
      );
      if (ledger.reserved !== 0n || holds !== 0) {
        // A hold that outlives its TTL is being renewed: some process still runs (or leaked) its call.
        const sample = holdEntries.map(
          ([id, micros]) =>
            `${id}=${micros} (${toldOf.has(id) ? `told ${toldOf.get(id) ?? ""}` : "no client saw this id"})`,
        );
        breach(
          "nothing reserved",
          `reserved ${ledger.reserved} micros in ${holds} live hold(s) after the TTL passed with no traffic: ` +
            show(sample),
        );
      }
      if (ledger.spent > ledger.cap) breach("spent <= cap", `spent ${ledger.spent} > cap ${ledger.cap}`);
      if ([...partials.values()].some((v) => v < 0n)) breach("partials >= 0", "a negative partial charge");

      // Ids: unique, in one place only, and consistent with what each client was told.
      const dupRecords = duplicates(recordIds);
      if (dupRecords.length > 0) breach("usage-record ids unique", `ids with several records: ${show(dupRecords)}`);
      const both = [...partials.keys()].filter((id) => recordSet.has(id));
      if (both.length > 0)
        breach("ids unique across records and partials", `ids with a record and a partial: ${show(both)}`);
      const dupTold = duplicates([...seen.success, ...seen.abort, ...seen.notBilled]);
      if (dupTold.length > 0) breach("completion ids unique", `ids told to more than one call: ${show(dupTold)}`);
      const billedNotBilled = seen.notBilled.filter((id) => recordSet.has(id) || partials.has(id));
      const charged = (id: string) =>
        `${id} (told ${toldOf.get(id) ?? "?"}; ${recordSet.has(id) ? "has a record" : `partial ${partials.get(id)}`})`;
      if (billedNotBilled.length > 0)
        breach(
          "told 'not billed' => not billed",
          `${billedNotBilled.length} ids told not billed but charged: ${show(billedNotBilled.map(charged))}`,
        );
      const missing = seen.success.filter((id) => !recordSet.has(id));
      if (missing.length > 0)
        breach("told success => one record", `ids told success without a usage record: ${show(missing)}`);
      const successPartial = seen.success.filter((id) => partials.has(id));
      if (successPartial.length > 0)
        breach("told success => no partial", `ids told success with a partial charge: ${show(successPartial)}`);
      const abortRecord = seen.abort.filter((id) => recordSet.has(id));
      if (abortRecord.length > 0)
        breach("told spend-cap abort => no record", `aborted ids with a usage record: ${show(abortRecord)}`);

      const successSet = new Set(seen.success);
      const recordsNotSeenAsSuccess = recordIds.filter((id) => !successSet.has(id)).length;
      if (recordsNotSeenAsSuccess > seen.unknown.length) {
        breach(
          "unseen records <= left/cut calls",
          `${recordsNotSeenAsSuccess} records no client saw as a success, ` +
            `but only ${seen.unknown.length} calls whose client left or was cut off`,
        );
      }
      const unseen = [...recordIds, ...partials.keys()].filter((id) => !seen.all.has(id));
      // A charge no client saw the id of can only belong to a call that saw no id and may be
      // charged: one whose client left or was cut off (or, for a partial, an abort before any chunk).
      const mayBeChargedWithoutId = mine.filter(
        (c) =>
          c.id === undefined && (UNKNOWN_KINDS.has(c.told) || c.told === "malformed" || c.told === "spend-cap-abort"),
      ).length;
      if (unseen.length > mayBeChargedWithoutId) {
        breach(
          "unseen charges <= left/cut calls with no id",
          `${unseen.length} records or partials with ids no client saw, ` +
            `but only ${mayBeChargedWithoutId} left/cut calls that saw no id`,
        );
      }
      const malformed = mine.filter((c) => c.told === "malformed");
      if (malformed.length > 0)
        breach(
          "answers follow the contract",
          `${malformed.length} answers fit no outcome of SPEC, e.g. ${malformed
            .slice(0, 3)
            .map((c) => `${c.via}: ${c.detail}`)
            .join("; ")}`,
        );
      figures.push({
        index: a.index,
        id: a.id,
        period: ledger.period,
        cap: ledger.cap,
        spent: ledger.spent,
        reserved: ledger.reserved,
        holds,
        records: recordIds.length,
        recordsSum,
        partials: partials.size,
        partialsSum,
        partialCounter,
        partialsHash: (await redis.exists(`${base}:partials`)) === 1,
        toldSuccess: seen.success.length,
        toldAbort: seen.abort.length,
        toldNotBilled: mine.filter((c) => NOT_BILLED_KINDS.has(c.told)).length,
        unknownCalls: seen.unknown.length,
        recordsNotSeenAsSuccess,
        unseenCharges: unseen.length,
      });
    }
  } finally {
    redis.disconnect();
  }
  return { figures, breaches };
}
