import { describe, expect, it } from "vitest";
import { formatDecimalUsd, formatInputUsd, formatUsd, microsToDollars, parseUsd } from "./money.ts";

describe("formatUsd", () => {
  it.each([
    [0n, "$0.00"],
    [1n, "$0.000001"],
    [72n, "$0.000072"],
    [10_000n, "$0.01"],
    [1_234_567n, "$1.234567"],
    [1_500_000n, "$1.50"],
    [10_000_000n, "$10.00"],
    [1_234_567_890_000n, "$1,234,567.89"],
    [-2_500_000n, "-$2.50"],
    [9_223_372_036_854_775_807n, "$9,223,372,036,854.775807"],
  ])("formats %s micros as %s", (micros, text) => {
    expect(formatUsd(micros)).toBe(text);
  });
});

describe("formatDecimalUsd and formatInputUsd", () => {
  it("gives six fixed places for machines and the shortest decimal for inputs", () => {
    expect(formatDecimalUsd(123n)).toBe("0.000123");
    expect(formatDecimalUsd(12_500_000n)).toBe("12.500000");
    expect(formatDecimalUsd(-1n)).toBe("-0.000001");
    expect(formatInputUsd(12_500_000n)).toBe("12.5");
    expect(formatInputUsd(10_000_000n)).toBe("10");
    expect(formatInputUsd(0n)).toBe("0");
    expect(formatInputUsd(1n)).toBe("0.000001");
  });
});

describe("parseUsd", () => {
  it.each([
    ["25", 25_000_000n],
    ["12.5", 12_500_000n],
    ["12.50", 12_500_000n],
    ["$1,000.25", 1_000_250_000n],
    [" 0.000001 ", 1n],
    [".5", 500_000n],
    ["7.", 7_000_000n],
    ["0", 0n],
    // Sums that drift through floats stay exact: 0.1 + 0.2 style inputs.
    ["0.3", 300_000n],
    ["1.005", 1_005_000n],
    ["9223372036854.775807", 9_223_372_036_854_775_807n],
  ])("reads %j as %s micros", (text, micros) => {
    expect(parseUsd(text)).toEqual({ ok: true, micros });
  });

  it.each(["", " ", ".", "-1", "abc", "1.2.3", "1,00", "1e3", "12.3456789", "9223372036854.775808"])(
    "refuses %j",
    (text) => {
      const parsed = parseUsd(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.error).toMatch(/\.$/);
    },
  );

  it("round-trips with formatInputUsd", () => {
    for (const micros of [0n, 1n, 999_999n, 1_000_000n, 12_345_678n, 5_500_000n]) {
      expect(parseUsd(formatInputUsd(micros))).toEqual({ ok: true, micros });
    }
  });

  it("explains why an amount is refused", () => {
    expect(parseUsd("1.1234567")).toEqual({ ok: false, error: "Use at most six decimal places (a micro-dollar)." });
  });
});

describe("microsToDollars", () => {
  it("is a float for chart scales", () => {
    expect(microsToDollars(2_500_000n)).toBe(2.5);
  });
});
