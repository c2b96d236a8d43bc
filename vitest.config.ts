import { defineConfig } from "vitest/config";

/**
 * Suites the `e2e-redis` project leaves out: they touch no store, or they spawn Redis servers
 * of their own whatever the project, so running them twice would prove nothing new.
 */
const ONCE = [
  "test/architecture.test.ts",
  "test/readme.test.ts",
  "test/dev-bootstrap.test.ts",
  "test/redis-faults.test.ts",
  "test/multi-process.test.ts",
  "test/key-rotation-processes.test.ts",
  "test/redis-shared-cache.test.ts",
  "test/support/fake-upstream.test.ts",
  "test/redis-frozen.test.ts",
  "test/one-of-each.test.ts",
  "test/workers.test.ts",
  "test/webhook-restart.test.ts",
  // The console's browser tests: the RPCs they drive run on both stores in their own suites.
  "test/console/**",
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The JSON report is what CI counts; the default reporter is for people.
    reporters: ["default", "json"],
    outputFile: { json: ".vitest-report.json" },
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: "unit", include: ["src/**/*.test.ts", "console/src/**/*.test.ts"] } },
      { extends: true, test: { name: "e2e-memory", include: ["test/**/*.test.ts"] } },
      {
        extends: true,
        // The whole end-to-end suite again, each file on a redis-server of its own.
        test: { name: "e2e-redis", include: ["test/**/*.test.ts"], exclude: ONCE, env: { SLUICE_TEST_STORE: "redis" } },
      },
    ],
  },
});
