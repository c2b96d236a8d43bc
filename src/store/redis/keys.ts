/**
 * Redis key names. Every key that holds an account's money or records shares the hash tag
 * `{a:<accountId>}`, so one Lua script can touch them all and Redis Cluster keeps them in one
 * slot. Periods are part of the names (UTC months), so a new month starts from zero with no
 * rollover job.
 */
export function createKeys(prefix: string) {
  const account = (id: string) => `${prefix}:{a:${id}}`;
  return {
    accountCount: `${prefix}:accounts:count`,
    invalidations: `${prefix}:invalidate`,
    account: (id: string) => `${account(id)}:account`,
    accountKeys: (id: string) => `${account(id)}:keys`,
    apiKey: (accountId: string, keyId: string) => `${account(accountId)}:key:${keyId}`,
    keyByHash: (hash: string) => `${prefix}:key-by-hash:${hash}`,
    keyById: (keyId: string) => `${prefix}:key-by-id:${keyId}`,
    /** GCRA state of a key, in its account's slot so admission and reservation are one script. */
    gcra: (accountId: string, keyId: string) => `${account(accountId)}:gcra:${keyId}`,
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
      };
    },
  };
}
