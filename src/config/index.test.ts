import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./index.ts";

describe("loadConfig", () => {
  it("fills DESIGN's defaults from an empty environment", () => {
    const c = loadConfig({});
    expect([c.PORT, c.GRPC_PORT, c.METRICS_PORT, c.SLUICE_SSE_KEEPALIVE_MS]).toEqual([8080, 50051, 9464, 15000]);
    expect(c.SLUICE_ADMIN_TOKEN).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
  });

  it("treats empty variables as unset", () => {
    expect(loadConfig({ PORT: "", SLUICE_ADMIN_TOKEN: "" }).PORT).toBe(8080);
  });

  it("names every bad variable in one error", () => {
    let caught: unknown;
    try {
      loadConfig({ PORT: "eighty", SLUICE_ADMIN_TOKEN: "short", REDIS_URL: "not a url" });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const message = (caught as Error).message;
    for (const name of ["PORT", "SLUICE_ADMIN_TOKEN", "REDIS_URL"]) expect(message).toContain(name);
  });

  it("reads the spend-alert thresholds as sorted whole percents, or none, and refuses anything else", () => {
    expect(loadConfig({}).SLUICE_SPEND_ALERT_THRESHOLDS).toEqual([50, 80, 100]);
    expect(loadConfig({ SLUICE_SPEND_ALERT_THRESHOLDS: "90,25" }).SLUICE_SPEND_ALERT_THRESHOLDS).toEqual([25, 90]);
    expect(loadConfig({ SLUICE_SPEND_ALERT_THRESHOLDS: "none" }).SLUICE_SPEND_ALERT_THRESHOLDS).toEqual([]);
    for (const bad of ["0,50", "50,50", "101", "50, 80", "half", "50.5"])
      expect(() => loadConfig({ SLUICE_SPEND_ALERT_THRESHOLDS: bad }), bad).toThrow(/SLUICE_SPEND_ALERT_THRESHOLDS/);
    const c = loadConfig({});
    expect([c.SLUICE_WEBHOOK_MAX_ATTEMPTS, c.SLUICE_WEBHOOK_RETRY_BASE_MS, c.SLUICE_WEBHOOK_TIMEOUT_MS]).toEqual([
      8, 30000, 10000,
    ]);
  });

  it("needs no shared secret for an edge-only process: the key check is a named, uncharged RPC", () => {
    expect(loadConfig({ CORE_URL: "http://core:50051" }).CORE_URL).toBe("http://core:50051");
  });
});
