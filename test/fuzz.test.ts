import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Family, FuzzCase } from "./fuzz/case-arbitraries.ts";
import {
  checkAlive,
  decodableOnCore,
  fuzzProperty,
  installProcessGuard,
  newStats,
  prepareTarget,
  type FuzzTarget,
} from "./fuzz/runner.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

/**
 * A sample of the fuzzer (issue 7) in `npm test`: hostile bodies, headers and framing against
 * the HTTP edge, and hostile Connect JSON and binary messages against the core, each case
 * checked against its one documented answer. `npm run fuzz` runs 100,000 of them.
 * Replay a failure with `FUZZ_SEED=<seed>`; `FUZZ_RUNS` changes the sample size.
 */
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 7_2026_11;
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/** The sample's properties: the edge, and the core split by whether the message decodes. */
const PROPERTIES: Array<{ name: string; family: Family; only?: (c: FuzzCase) => boolean }> = [
  { name: "edge: hostile bodies, headers and framing", family: "edge" },
  { name: "core: Connect JSON and binary messages that decode", family: "core", only: decodableOnCore },
  {
    name: "core: Connect JSON and binary messages that do not decode",
    family: "core",
    only: (c) => !decodableOnCore(c),
  },
];

describe(`fuzz sample (seed ${SEED}, ${RUNS} cases per property)`, () => {
  let app: TestApp;
  let target: FuzzTarget;
  const guard = installProcessGuard();
  beforeAll(async () => {
    app = await startTestApp();
    target = await prepareTarget({ edgeUrl: app.edgeUrl, coreUrl: app.coreUrl ?? "" }, app.admin, app.adminHeaders);
  });
  afterAll(async () => {
    guard.dispose();
    target?.h2.close();
    await app?.close();
  });

  for (const p of PROPERTIES) {
    it(`${p.name}: each gets its documented answer, never a 5xx, and the process stays up`, async () => {
      const stats = newStats();
      const property = fuzzProperty(target, p.family, guard, stats, {
        keepGoing: false,
        aliveEvery: 25,
        ...(p.only && { only: p.only }),
      });
      const details = await fc.check(property, { numRuns: RUNS, seed: SEED });
      if (details.failed)
        throw new Error(
          `${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}\nReplay with FUZZ_SEED=${SEED}`,
        );
      await checkAlive(target);
      expect(guard.problems).toEqual([]);
      expect(stats.done).toBe(RUNS);
    }, 120_000);
  }
});
