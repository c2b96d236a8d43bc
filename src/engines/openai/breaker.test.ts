import { describe, expect, it } from "vitest";
import { createBreaker } from "./breaker.ts";

describe("createBreaker", () => {
  const clock = () => {
    const c = { t: 0, now: () => c.t };
    return c;
  };

  it("opens after the threshold of failures in a row, and a success resets the count", () => {
    const c = clock();
    const b = createBreaker({ failureThreshold: 3, openMs: 1000, now: c.now });
    b.failure();
    b.failure();
    b.success();
    b.failure();
    b.failure();
    expect(b.state).toBe("closed");
    expect(b.tryAcquire()).toBe("call");
    b.failure();
    expect(b.state).toBe("open");
    expect(b.tryAcquire()).toBe(false);
    expect(b.available()).toBe(false);
  });

  it("lets exactly one probe through after openMs, and closes on its success", () => {
    const c = clock();
    const b = createBreaker({ failureThreshold: 1, openMs: 1000, now: c.now });
    b.failure();
    c.t = 999;
    expect(b.tryAcquire()).toBe(false);
    c.t = 1000;
    expect(b.available()).toBe(true);
    expect(b.tryAcquire()).toBe("probe");
    expect(b.state).toBe("half-open");
    expect(b.tryAcquire()).toBe(false);
    expect(b.available()).toBe(false);
    b.success();
    expect(b.state).toBe("closed");
    expect(b.tryAcquire()).toBe("call");
  });

  it("opens again when the probe fails, for another full openMs", () => {
    const c = clock();
    const b = createBreaker({ failureThreshold: 5, openMs: 1000, now: c.now });
    for (let i = 0; i < 5; i++) b.failure();
    c.t = 1000;
    expect(b.tryAcquire()).toBe("probe");
    b.failure();
    expect(b.state).toBe("open");
    c.t = 1999;
    expect(b.tryAcquire()).toBe(false);
    c.t = 2000;
    expect(b.tryAcquire()).toBe("probe");
  });

  it("frees the probe slot of a call that proved nothing, without closing or opening", () => {
    const c = clock();
    const b = createBreaker({ failureThreshold: 1, openMs: 1000, now: c.now });
    b.failure();
    c.t = 1000;
    expect(b.tryAcquire()).toBe("probe");
    expect(b.tryAcquire()).toBe(false);
    b.release();
    expect(b.state).toBe("half-open");
    expect(b.tryAcquire()).toBe("probe");
  });
});
