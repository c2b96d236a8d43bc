/**
 * Redis key names. Every key that holds an account's money or records shares the hash tag
 * `{a:<accountId>}`, so one Lua script can touch them all and Redis Cluster keeps them in one
 * slot. Periods are part of the names (UTC months), so a new month starts from zero with no
 * rollover job.
 */
export function createKeys(prefix: string) {
  const account = (id: string) => `${prefix}:{a:${id}}`;
  const [accountHead, accountTail] = [`${prefix}:{a:`, "}:account"];
  return {
    /** Accounts ever created (a retried create may count twice): `hasAccounts` reads it. */
    accountCount: `${prefix}:accounts:count`,
    invalidations: `${prefix}:invalidate`,
    /**
     * Ids of the accounts with one email (normalized by `normalizeEmail`), for
     * `findAccountsByEmail`: written by `createAccount` (emails never change), never expires.
     */
    accountsByEmail: (normalizedEmail: string) => `${prefix}:accounts-by-email:${normalizedEmail}`,
    /** Set once the email index holds every account created before it existed (`backfillEmailIndex`). */
    emailIndexBackfilled: `${prefix}:migrations:accounts-by-email`,
    account: (id: string) => `${account(id)}:account`,
    /** A SCAN MATCH pattern for every account hash (the prefix's glob characters escaped). */
    accountPattern: `${prefix.replace(/[*?[\]\\]/g, "\\$&")}:{a:*}:account`,
    /** The account id of an account hash's key, or undefined for any other key. */
    accountIdOf: (key: string): string | undefined => {
      const id = key.slice(accountHead.length, -accountTail.length);
      const matches = key.startsWith(accountHead) && key.endsWith(accountTail) && id.length > 0 && !id.includes("}");
      return matches ? id : undefined;
    },
    accountKeys: (id: string) => `${account(id)}:keys`,
    apiKey: (accountId: string, keyId: string) => `${account(accountId)}:key:${keyId}`,
    /**
     * The key a secret's hash belongs to (`<accountId> <keyId>`): every key's current secret and
     * the one its last rotation replaced. Outside the account's slot (a lookup knows only the
     * hash), so writes order it around the key's own hash (see `createRedisApiKeys`).
     */
    keyByHash: (hash: string) => `${prefix}:key-by-hash:${hash}`,
    keyById: (keyId: string) => `${prefix}:key-by-id:${keyId}`,
    /**
     * GCRA state of a key, in its account's slot so a rate-limit charge and a reservation are
     * one script. It expires a second after its theoretical arrival time, past which it means
     * nothing more than no state.
     */
    gcra: (accountId: string, keyId: string) => `${account(accountId)}:gcra:${keyId}`,
    /**
     * The token budgets of an account's keys that have a tokens-per-minute limit: field key id,
     * value the budget's theoretical arrival time (GCRA in tokens). One hash in the account's slot,
     * so a call's end can give tokens back knowing only its hold; a field whose time has passed
     * means a full budget, and there is one per key at most, so nothing expires.
     */
    tokens: (accountId: string) => `${account(accountId)}:tokens`,
    usage: (id: string) => `${account(id)}:usage`,
    period: (id: string, period: string) => {
      const base = `${account(id)}:p:${period}`;
      return {
        spent: `${base}:spent`,
        reservations: `${base}:resv`,
        expiries: `${base}:resv-exp`,
        reserved: `${base}:reserved`,
        settled: `${base}:settled`,
        released: `${base}:released`,
        partial: `${base}:partial`,
        /** Spend-cap aborts' charges by completion id, so a ledger can be checked call by call. */
        partials: `${base}:partials`,
        /**
         * What `spent` grew by on each UTC date of the period (field "YYYY-MM-DD"), for
         * `spendByDay`. Like `spent` and `partial`, and unlike the id sets, it never expires.
         */
        days: `${base}:days`,
        /** What each key's settles charged this period (field key id), for key caps; never expires. */
        keySpent: `${base}:key-spent`,
        /** What each key's live holds add up to (field key id), kept with the holds themselves. */
        keyReserved: `${base}:key-resv`,
        /**
         * Who holds each live hold (field completion id): "<key id> <tokens taken> <ms per token>
         * <budget time after the take>", so the hold's end, or its expiry, updates its key's sums.
         */
        holders: `${base}:holders`,
      };
    },
  };
}
