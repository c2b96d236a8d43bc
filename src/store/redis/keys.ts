/**
 * Redis key names. Every key that holds an account's money or records shares the hash tag
 * `{a:<accountId>}`, so one Lua script can touch them all and Redis Cluster keeps them in one
 * slot. Periods are part of the names (UTC months), so a new month starts from zero with no
 * rollover job.
 */
export function createKeys(prefix: string) {
  const account = (id: string) => `${prefix}:{a:${id}}`;
  /** The account id of a key of one kind (its name after the hash tag), or undefined for any other key. */
  const accountIdIn = (key: string, tail: string): string | undefined => {
    const head = `${prefix}:{a:`;
    const id = key.slice(head.length, -tail.length);
    const matches = key.startsWith(head) && key.endsWith(tail) && id.length > 0 && !id.includes("}");
    return matches ? id : undefined;
  };
  const escaped = prefix.replace(/[*?[\]\\]/g, "\\$&");
  /** Spend alerts' global keys: one hash tag, so the queue's scripts touch one slot. */
  const webhooks = `${prefix}:{wh}`;
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
    accountPattern: `${escaped}:{a:*}:account`,
    /** The account id of an account hash's key, or undefined for any other key. */
    accountIdOf: (key: string) => accountIdIn(key, "}:account"),
    /**
     * Spend alerts a settle raised, in its account's slot (the settle script cannot reach the
     * global queue's): the process that settled moves them to the queue at once, and a sweep
     * moves those a crash left behind (see `createRedisWebhooks`).
     */
    alertOutbox: (id: string) => `${account(id)}:alerts-outbox`,
    /** A SCAN MATCH pattern for every alert outbox. */
    alertOutboxPattern: `${escaped}:{a:*}:alerts-outbox`,
    /** The account id of an alert outbox's key, or undefined for any other key. */
    accountIdOfOutbox: (key: string) => accountIdIn(key, "}:alerts-outbox"),
    /** The global keys of spend alerts' delivery, all under one hash tag. */
    webhooks: {
      /** The endpoints (field endpoint id, value its JSON). */
      endpoints: `${webhooks}:endpoints`,
      /** The queue of alerts not fanned out yet (a stream, read by one consumer group). */
      queue: `${webhooks}:queue`,
      /** An alert's fields, by alert id; its existence makes queueing it again a no-op. */
      event: (eventId: string) => `${webhooks}:event:${eventId}`,
      /** Pending deliveries ("<event id> <endpoint id>") by when they are due, or their lease ends. */
      due: `${webhooks}:due`,
      /** One alert's delivery to one endpoint: status, attempts, last answer. */
      delivery: (endpointId: string, eventId: string) => `${webhooks}:delivery:${endpointId}:${eventId}`,
      /** An endpoint's deliveries by creation time (the newest `DELIVERIES_KEPT`). */
      deliveries: (endpointId: string) => `${webhooks}:deliveries:${endpointId}`,
      /** Held while one process sweeps outboxes, so the deployment sweeps once per interval. */
      sweepLock: `${webhooks}:sweep-lock`,
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
        /** The spend-alert thresholds fired this period (`firedMember`), each raised once. */
        alertsFired: `${base}:alerts-fired`,
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
