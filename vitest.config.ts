import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The JSON report is what CI counts; the default reporter is for people.
    reporters: ["default", "json"],
    outputFile: { json: ".vitest-report.json" },
    maxWorkers: 2,
  },
});
