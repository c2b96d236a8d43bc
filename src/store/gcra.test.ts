import { describe, expect, it } from "vitest";
import { gcra } from "./gcra.ts";

const NOW = 1_800_000_000_000;

/** Runs `count` requests at the same instant, threading the stored TAT through. */
function burstAt(count: number, rps: number, burst: number, nowMs: number, start?: number) {
  let tat = start;
  const decisions = [];
  for (let i = 0; i < count; i++) {
    const step = gcra(tat, rps, burst, nowMs);
    tat = step.tatMs;
    decisions.push(step.decision);
  }
  return { decisions, tat };
}

describe("gcra", () => {
  it("allows a fresh key with burst - 1 remaining and one interval to reset", () => {
    const { decision, tatMs } = gcra(undefined, 10, 10, NOW);
    expect(decision).toEqual({ allowed: true, limit: 10, remaining: 9, resetMs: 100, retryAfterMs: 0 });
    expect(tatMs).toBe(NOW + 100);
  });

  it("counts remaining down through the burst, then refuses with an exact retry", () => {
    const { decisions, tat } = burstAt(3, 10, 2, NOW);
    expect(decisions[0]).toEqual({ allowed: true, limit: 2, remaining: 1, resetMs: 100, retryAfterMs: 0 });
    expect(decisions[1]).toEqual({ allowed: true, limit: 2, remaining: 0, resetMs: 200, retryAfterMs: 0 });
    expect(decisions[2]).toEqual({ allowed: false, limit: 2, remaining: 0, resetMs: 200, retryAfterMs: 100 });
    // A refusal does not move the stored time.
    expect(tat).toBe(NOW + 200);
  });

  it("allows exactly `burst` requests at one instant for several shapes", () => {
    for (const [rps, burst] of [
      [1, 1],
      [10, 10],
      [5, 3],
      [100, 20],
      [0.5, 4],
    ] as const) {
      const { decisions } = burstAt(burst + 5, rps, burst, NOW);
      expect(decisions.filter((d) => d.allowed)).toHaveLength(burst);
      expect(decisions.slice(0, burst).every((d) => d.allowed)).toBe(true);
      const refused = decisions[burst];
      expect(refused?.allowed).toBe(false);
      expect(refused?.retryAfterMs).toBe(Math.ceil(1000 / rps));
    }
  });

  it("allows again exactly when the retry delay has passed, not a millisecond before", () => {
    const { tat } = burstAt(2, 10, 2, NOW);
    const early = gcra(tat, 10, 2, NOW + 99);
    expect(early.decision.allowed).toBe(false);
    expect(early.decision.retryAfterMs).toBe(1);
    const onTime = gcra(tat, 10, 2, NOW + 100);
    expect(onTime.decision.allowed).toBe(true);
    expect(onTime.decision.remaining).toBe(0);
    expect(onTime.tatMs).toBe(NOW + 300);
  });

  it("refills fully after an idle period and never lets an old TAT add credit", () => {
    const { tat } = burstAt(5, 10, 5, NOW);
    const later = gcra(tat, 10, 5, NOW + 60_000);
    expect(later.decision).toEqual({ allowed: true, limit: 5, remaining: 4, resetMs: 100, retryAfterMs: 0 });
    expect(later.tatMs).toBe(NOW + 60_100);
  });

  it("refills one slot per interval", () => {
    const { tat } = burstAt(10, 10, 10, NOW);
    const after350 = gcra(tat, 10, 10, NOW + 350);
    expect(after350.decision.allowed).toBe(true);
    // 3.5 intervals have drained; one is used by this request.
    expect(after350.decision.remaining).toBe(2);
    expect(after350.decision.resetMs).toBe(750);
  });

  it("rounds fractional intervals up in retryAfterMs and resetMs", () => {
    const { decisions } = burstAt(2, 3, 1, NOW);
    expect(decisions[0]?.resetMs).toBe(334);
    expect(decisions[1]).toEqual({ allowed: false, limit: 1, remaining: 0, resetMs: 334, retryAfterMs: 334 });
  });

  it("keeps the sustained rate: 10 rps over [0 s, 10 s] allows burst + 100 requests", () => {
    let tat: number | undefined;
    let allowed = 0;
    for (let t = 0; t <= 10_000; t += 10) {
      const step = gcra(tat, 10, 10, NOW + t);
      tat = step.tatMs;
      if (step.decision.allowed) allowed++;
    }
    expect(allowed).toBe(110);
  });
});
