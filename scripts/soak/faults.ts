import type { ManagedChild } from "./child.ts";
import type { Cluster } from "./cluster.ts";
import { Tally } from "./outcomes.ts";
import type { Rng } from "./rng.ts";

/** The faults the soak injects, one at a time, each healed before the next. */
export type FaultKind = "redis-freeze" | "redis-kill" | "upstream-kill" | "upstream-freeze" | "sluice-kill";
/** One bag of draws: a Redis freeze twice, as it is the fault most likely to lose a reply. */
const BAG: readonly FaultKind[] = [
  "redis-freeze",
  "redis-freeze",
  "redis-kill",
  "upstream-kill",
  "upstream-freeze",
  "sluice-kill",
];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Starts a child again, retrying a few times (a restart can race a port still closing). */
async function restart(child: ManagedChild): Promise<void> {
  let last: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await child.start();
    } catch (err) {
      last = err;
      await sleep(500);
    }
  }
  throw last;
}

/**
 * Injects faults on a seeded schedule: Redis frozen (SIGSTOP, then SIGCONT) and killed
 * (SIGKILL, restarted on its port from its append-only file), an upstream killed or frozen,
 * a Sluice process killed and restarted. Kinds are drawn from a shuffled bag so even a short
 * run meets each of them. It also restarts any child that died on its own and counts it:
 * a Sluice crash is a finding in itself.
 */
export class FaultInjector {
  /** Faults injected, by kind. */
  readonly injected = new Tally();
  /** Children that exited on their own and were restarted, by name. */
  readonly crashes = new Tally();
  /** Problems of the injector itself (a restart that failed). */
  readonly problems: string[] = [];
  /** Sluice processes that are down on purpose; traffic steers around them. */
  readonly down = new Set<number>();
  private bag: FaultKind[] = [];

  private readonly cluster: Cluster;
  private readonly rng: Rng;
  private readonly log: (line: string) => void;

  constructor(cluster: Cluster, rng: Rng, log: (line: string) => void) {
    this.cluster = cluster;
    this.rng = rng;
    this.log = log;
  }

  /** Runs until `stopped()`; resolves once the last fault is healed. */
  async run(stopped: () => boolean): Promise<void> {
    while (!stopped()) {
      const gap = this.rng.int(2_000, 7_000);
      for (let waited = 0; waited < gap && !stopped(); waited += 200) {
        await sleep(200);
        await this.reviveCrashed();
      }
      if (stopped()) break;
      if (this.bag.length === 0) this.bag = this.shuffled(BAG);
      const kind = this.bag.pop();
      if (kind)
        await this.inject(kind).catch((err: unknown) => this.problems.push(`${kind}: ${String(err).slice(0, 300)}`));
    }
    await this.heal();
  }

  /** Thaws and restarts whatever is frozen or down, so the end checks see a whole cluster. */
  async heal(): Promise<void> {
    const c = this.cluster;
    for (const child of [c.redis, ...c.upstreams.map((u) => u.child), ...c.sluices.map((s) => s.child)]) {
      if (child.frozen()) child.thaw();
      if (!child.running())
        await restart(child).catch((err: unknown) =>
          this.problems.push(`heal ${child.name}: ${String(err).slice(0, 300)}`),
        );
    }
    this.down.clear();
  }

  /** A Fisher-Yates shuffle with the seeded generator. */
  private shuffled<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.rng.int(0, i);
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  }

  private async reviveCrashed(): Promise<void> {
    const c = this.cluster;
    const all = [c.redis, ...c.upstreams.map((u) => u.child), ...c.sluices.map((s) => s.child)];
    for (const [i, child] of all.entries()) {
      if (child.running()) continue;
      const sluiceIndex = i - 1 - c.upstreams.length;
      if (sluiceIndex >= 0 && this.down.has(sluiceIndex)) continue;
      this.crashes.add(child.name);
      this.log(`${child.name} exited on its own; restarting it. Its last output:\n${child.tail().slice(-1500)}`);
      await restart(child).catch((err: unknown) =>
        this.problems.push(`revive ${child.name}: ${String(err).slice(0, 300)}`),
      );
    }
  }

  private async inject(kind: FaultKind): Promise<void> {
    const { redis, upstreams, sluices } = this.cluster;
    this.injected.add(kind);
    switch (kind) {
      case "redis-freeze": {
        // Mostly short; now and then longer than a store timeout's retries and the hold TTL.
        const ms = this.rng.chance(0.3) ? this.rng.int(5_000, 9_000) : this.rng.int(500, 4_000);
        this.log(`fault: redis frozen (SIGSTOP) for ${ms} ms`);
        redis.freeze();
        await sleep(ms);
        redis.thaw();
        return;
      }
      case "redis-kill":
        this.log("fault: redis killed (SIGKILL), then restarted from its append-only file");
        await redis.kill();
        await sleep(this.rng.int(200, 2_000));
        return restart(redis);
      case "upstream-kill": {
        const u = this.rng.pick(upstreams).child;
        this.log(`fault: ${u.name} killed (SIGKILL), then restarted`);
        await u.kill();
        await sleep(this.rng.int(500, 3_000));
        return restart(u);
      }
      case "upstream-freeze": {
        const u = this.rng.pick(upstreams).child;
        const ms = this.rng.int(2_000, 6_000);
        this.log(`fault: ${u.name} frozen (SIGSTOP) for ${ms} ms`);
        u.freeze();
        await sleep(ms);
        u.thaw();
        return;
      }
      case "sluice-kill": {
        const i = this.rng.int(0, sluices.length - 1);
        const s = sluices[i];
        if (!s) return;
        this.log(`fault: ${s.child.name} killed (SIGKILL), then restarted`);
        this.down.add(i);
        await s.child.kill();
        await sleep(this.rng.int(200, 1_500));
        try {
          await restart(s.child);
        } finally {
          this.down.delete(i);
        }
      }
    }
  }
}
