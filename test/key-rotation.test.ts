import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeSecrets, type Round, within } from "./support/key-probes.ts";
import { startTestApp, type TestApp } from "./support/harness.ts";

/**
 * Issue 11, key rotation through the whole app, on the memory store and (the `e2e-redis`
 * project) on Redis: calls keep presenting the old and the new secret while an operator
 * rotates the key, and at no instant does neither work. The app's clock is the test's, so the
 * grace period ends when the test says, not when a sleep happens to.
 */
const GRACE_MS = 60_000;
const OK = "200";
const REFUSED = "401 invalid_api_key";

describe("rotating a key while calls keep coming", () => {
  let app: TestApp;
  const clock = { offsetMs: 0 };
  beforeAll(async () => {
    app = await startTestApp({}, { now: () => Date.now() + clock.offsetMs });
  });
  afterAll(async () => {
    await app?.close();
  });

  const rotate = (apiKeyId: string, graceMs: number) =>
    app.admin.rotateApiKey({ apiKeyId, gracePeriod: durationFromMs(graceMs) }, { headers: app.adminHeaders });
  /** What each secret got in the rounds that began and ended in `phase`. */
  const outcomes = (rounds: Round[], phase: string) => {
    const of = within(rounds, phase);
    return { old: [...new Set(of.map((r) => r.old))], new: [...new Set(of.map((r) => r.new))] };
  };

  it("accepts the old secret through the grace period and the new one from the moment it is issued", async () => {
    const { apiKey, apiKeyId } = await app.newAccount({ rps: 1_000_000, burst: 1_000_000 });
    const prober = probeSecrets({ edges: [app.edgeUrl], oldSecret: apiKey, loopsPerEdge: 4 });
    await prober.rounds(10);
    prober.phase("rotating");
    const { secret } = await rotate(apiKeyId, GRACE_MS);
    prober.phase("grace", secret);
    await prober.rounds(20);
    prober.phase("ending");
    clock.offsetMs += GRACE_MS;
    prober.phase("after");
    await prober.rounds(20);
    const rounds = await prober.stop();

    // Every round, those that straddle the rotation or the clock's move included.
    expect(rounds.filter((r) => r.old !== OK && r.new !== OK)).toEqual([]);
    expect(rounds.filter((r) => r.new === undefined && r.old !== OK)).toEqual([]);
    expect(outcomes(rounds, "before")).toEqual({ old: [OK], new: [undefined] });
    expect(outcomes(rounds, "grace")).toMatchObject({ old: [OK], new: [OK] });
    expect(outcomes(rounds, "after")).toMatchObject({ old: [REFUSED], new: [OK] });
  });

  it("with no grace period refuses the old secret once the rotation has answered, never the new one", async () => {
    const { apiKey, apiKeyId } = await app.newAccount({ rps: 1_000_000, burst: 1_000_000 });
    const prober = probeSecrets({ edges: [app.edgeUrl], oldSecret: apiKey, loopsPerEdge: 4 });
    await prober.rounds(10);
    prober.phase("rotating");
    const { secret } = await rotate(apiKeyId, 0);
    prober.phase("after", secret);
    await prober.rounds(20);
    const rounds = await prober.stop();
    expect(outcomes(rounds, "before")).toMatchObject({ old: [OK] });
    expect(outcomes(rounds, "after")).toMatchObject({ old: [REFUSED], new: [OK] });
  });

  it("rotated twice, then revoked: the older secret ends at the second rotation, both at revocation", async () => {
    const { apiKey, apiKeyId } = await app.newAccount({ rps: 1_000_000, burst: 1_000_000 });
    const first = await rotate(apiKeyId, GRACE_MS);
    const second = await rotate(apiKeyId, GRACE_MS);
    const prober = probeSecrets({ edges: [app.edgeUrl], oldSecret: first.secret });
    prober.phase("twice", second.secret);
    await prober.rounds(5);
    // Rounds in flight while the revocation lands belong to neither phase.
    prober.phase("revoking");
    await app.admin.revokeApiKey({ apiKeyId }, { headers: app.adminHeaders });
    prober.phase("revoked");
    await prober.rounds(5);
    const rounds = await prober.stop();
    expect(outcomes(rounds, "twice")).toMatchObject({ old: [OK], new: [OK] });
    expect(outcomes(rounds, "revoked")).toMatchObject({ old: [REFUSED], new: [REFUSED] });
    const original = await fetch(`${app.edgeUrl}/v1/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(original.status).toBe(401);
  });
});
