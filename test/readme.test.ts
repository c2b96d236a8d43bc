import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { configSchema } from "../src/config/index.ts";
import { CATALOGUE } from "../src/errors/catalogue.ts";
import { createMetrics } from "../src/metrics.ts";

/** Keeps the README true as the code changes: its tables must name what the code has. */
const readme = readFileSync(join(import.meta.dirname, "..", "README.md"), "utf8");

describe("README", () => {
  it("opens with the two set-up commands", () => {
    const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(
      block
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split("#")[0]?.trim()),
    ).toEqual(["npm ci && npm start", "npm test"]);
  });

  it.each(Object.entries(configSchema.shape))("documents %s in the configuration table", (name, schema) => {
    // The table is column-aligned, so a name cell may be padded.
    const row = readme.split("\n").find((l) => new RegExp(`^\\| \`${name}\` +\\|`).test(l));
    expect(row).toBeDefined();
    expect(row).toContain(schema.description ?? "");
  });

  it.each(Object.keys(CATALOGUE))("documents the error code %s", (code) => {
    expect(readme).toContain(`\`${code}\``);
  });

  it.each(
    createMetrics()
      .registry.getMetricsAsArray()
      .map((m) => m.name),
  )("documents the metric %s in the metrics table", (name) => {
    expect(readme.split("\n").some((l) => l.startsWith(`| \`${name}\``))).toBe(true);
  });
});
