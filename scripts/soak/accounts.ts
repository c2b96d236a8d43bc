import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import type { Rng } from "./rng.ts";

/** One account of the run and its keys. */
export interface SoakAccount {
  index: number;
  id: string;
  /** Keys with a rate limit far above the traffic: they meet only the cap. */
  fastKey: string;
  /** A key limited to 2 requests/s (burst 2), on account 0 only: it meets 429s. */
  slowKey?: string;
}

/** A ledger as the Admin API reports it, for the current period. */
export interface AdminLedger {
  period: string;
  cap: bigint;
  spent: bigint;
  reserved: bigint;
  records: Array<{ id: string; cost: bigint }>;
}

/**
 * The Admin API over gRPC to whichever core answers: the soak kills Sluice processes, so it
 * tries each core in turn rather than depend on one.
 */
export class Admin {
  private readonly clients: Array<Client<typeof AdminService>>;
  private readonly headers: Record<string, string>;
  /** The last cap set per account: a cached (stale) read must never lower a cap. */
  private readonly capsSet = new Map<string, bigint>();

  constructor(coreUrls: string[], token: string) {
    this.clients = coreUrls.map((baseUrl) => createClient(AdminService, createGrpcTransport({ baseUrl })));
    this.headers = { authorization: `Bearer ${token}` };
  }

  /** Runs `fn` on each core in turn until one answers. */
  private async onAnyCore<T>(
    fn: (c: Client<typeof AdminService>, o: { headers: Record<string, string>; timeoutMs: number }) => Promise<T>,
  ): Promise<T> {
    let last: unknown;
    for (const c of this.clients) {
      try {
        return await fn(c, { headers: this.headers, timeoutMs: 5_000 });
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  /**
   * Creates `count` onboarded accounts with small caps (so spend-cap refusals and mid-stream
   * aborts are common) and their keys.
   */
  async createAccounts(count: number, rng: Rng): Promise<SoakAccount[]> {
    const out: SoakAccount[] = [];
    for (let index = 0; index < count; index++) {
      const cap = BigInt(rng.int(20, 60) * 1_000);
      const { account } = await this.onAnyCore((c, o) =>
        c.createAccount({ onboardingComplete: true, spendCapUsdMicros: cap, email: `soak-${index}@example.com` }, o),
      );
      if (!account) throw new Error("CreateAccount returned no account");
      const fast = await this.onAnyCore((c, o) =>
        c.createApiKey({ accountId: account.id, rateLimitRps: 100_000, burst: 100_000 }, o),
      );
      const soakAccount: SoakAccount = { index, id: account.id, fastKey: fast.secret };
      if (index === 0)
        soakAccount.slowKey = (
          await this.onAnyCore((c, o) => c.createApiKey({ accountId: account.id, rateLimitRps: 2, burst: 2 }, o))
        ).secret;
      out.push(soakAccount);
    }
    return out;
  }

  /**
   * Raises the cap of each account whose headroom has run low, by a small random step. Demand
   * outruns these steps on purpose: accounts stay near their caps for the whole run instead of
   * hitting them once and refusing everything after. Caps only ever rise, so the final
   * `spent <= cap` check stays meaningful. Returns the number of raises; failures (Redis frozen)
   * are skipped until the next round.
   */
  async topUp(accounts: SoakAccount[], rng: Rng): Promise<number> {
    let raised = 0;
    for (const a of accounts) {
      try {
        const { account } = await this.onAnyCore((c, o) => c.getAccount({ accountId: a.id }, o));
        if (!account || account.spendCapUsdMicros === undefined) continue;
        const known = this.capsSet.get(a.id) ?? 0n;
        const current = account.spendCapUsdMicros > known ? account.spendCapUsdMicros : known;
        const headroom = current - account.spentUsdMicros - account.reservedUsdMicros;
        if (headroom >= 10_000n) continue;
        const cap = current + BigInt(rng.int(5, 25) * 1_000);
        this.capsSet.set(a.id, cap);
        await this.onAnyCore((c, o) => c.updateAccount({ accountId: a.id, spendCapUsdMicros: cap }, o));
        raised += 1;
      } catch {
        /* a fault is on; next round */
      }
    }
    return raised;
  }

  /** Cap, spent, reserved and every usage record of an account (all pages). */
  async ledger(accountId: string): Promise<AdminLedger> {
    const { account } = await this.onAnyCore((c, o) => c.getAccount({ accountId }, o));
    if (!account) throw new Error(`GetAccount ${accountId} returned no account`);
    const records: AdminLedger["records"] = [];
    let pageToken = "";
    for (let pages = 0; pages < 100_000; pages++) {
      const page = await this.onAnyCore((c, o) => c.listUsageRecords({ accountId, pageSize: 1000, pageToken }, o));
      for (const r of page.usageRecords) records.push({ id: r.id, cost: r.costUsdMicros });
      pageToken = page.nextPageToken;
      if (pageToken === "") break;
    }
    return {
      period: account.period,
      cap: account.spendCapUsdMicros ?? 0n,
      spent: account.spentUsdMicros,
      reserved: account.reservedUsdMicros,
      records,
    };
  }
}
