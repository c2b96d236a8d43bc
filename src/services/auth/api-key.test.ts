import { describe, expect, it } from "vitest";
import { parseBearer } from "../../protocol/bearer.ts";
import { hashesEqual } from "../../store/key-secrets.ts";
import { displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey, KEY_PREFIX } from "./api-key.ts";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** The key with the character at `index` replaced by a different base62 character. */
function mutate(key: string, index: number): string {
  const current = key[index] ?? "";
  const replacement = BASE62[(BASE62.indexOf(current) + 1) % BASE62.length] ?? "0";
  return key.slice(0, index) + replacement + key.slice(index + 1);
}

describe("generateApiKey", () => {
  it("makes svc_sk_ keys with at least 32 base62 characters after the prefix", () => {
    const key = generateApiKey();
    expect(KEY_PREFIX).toBe("svc_sk_");
    expect(key.startsWith("svc_sk_")).toBe(true);
    expect(key).toMatch(/^svc_sk_[0-9A-Za-z]{32,}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
  });

  it("makes a different key every time", () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey()));
    expect(keys.size).toBe(200);
    for (const key of keys) expect(isWellFormedApiKey(key)).toBe(true);
  });

  it("carries enough randomness: about 5.95 bits per random character", () => {
    // 43 random characters are needed for 256 bits; at least 33 for DESIGN's 190 bits.
    const key = generateApiKey();
    expect(key.length - KEY_PREFIX.length).toBeGreaterThanOrEqual(33);
  });
});

describe("isWellFormedApiKey", () => {
  const key = generateApiKey();

  it("refuses a key with any single character after the prefix changed", () => {
    for (let i = KEY_PREFIX.length; i < key.length; i++) {
      const changed = mutate(key, i);
      expect(changed).not.toBe(key);
      expect(isWellFormedApiKey(changed), `position ${i}`).toBe(false);
    }
  });

  it("refuses a wrong prefix, a wrong length and foreign characters", () => {
    const body = key.slice(KEY_PREFIX.length);
    const refused = [
      "",
      "svc_sk_",
      `sk_${body}`,
      `svc_pk_${body}`,
      `SVC_SK_${body}`,
      key.slice(0, -1),
      `${key}0`,
      `${key.slice(0, -1)}_`,
      `${key.slice(0, 10)}-${key.slice(11)}`,
      ` ${key}`,
      `${key} `,
      `${key}\n`,
      `Bearer ${key}`,
    ];
    for (const candidate of refused) expect(isWellFormedApiKey(candidate), JSON.stringify(candidate)).toBe(false);
  });
});

describe("hashApiKey and hashesEqual", () => {
  it("hashes to 64 hex characters, deterministically, and never to the secret", () => {
    const key = generateApiKey();
    const hash = hashApiKey(key);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hashApiKey(key)).toBe(hash);
    expect(hash).not.toContain(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + 8));
  });

  it("compares equal hashes as equal and anything else as different", () => {
    const a = generateApiKey();
    const b = generateApiKey();
    expect(hashesEqual(hashApiKey(a), hashApiKey(a))).toBe(true);
    expect(hashesEqual(hashApiKey(a), hashApiKey(b))).toBe(false);
    expect(hashesEqual(hashApiKey(a), hashApiKey(a).slice(0, 62))).toBe(false);
    expect(hashesEqual(hashApiKey(a), "")).toBe(false);
  });

  it("shows only a short prefix for listings", () => {
    const key = generateApiKey();
    const prefix = displayPrefix(key);
    expect(key.startsWith(prefix)).toBe(true);
    expect(prefix.startsWith("svc_sk_")).toBe(true);
    expect(prefix.length).toBeLessThanOrEqual(KEY_PREFIX.length + 8);
  });
});

describe("parseBearer", () => {
  it.each([
    ["Bearer abc", "abc"],
    ["bearer abc", "abc"],
    ["BEARER abc", "abc"],
    ["Bearer   abc", "abc"],
    ["Bearer\tabc", "abc"],
    ["Bearer abc  ", "abc"],
    ["Bearer svc_sk_0123456789abcdefABCDEF", "svc_sk_0123456789abcdefABCDEF"],
  ])("reads the token of %j", (header, token) => {
    expect(parseBearer(header)).toBe(token);
  });

  it.each([
    [null],
    [undefined],
    [""],
    ["Bearer"],
    ["Bearer "],
    ["Bearer    "],
    ["Basic dXNlcjpwYXNz"],
    ["abc"],
    ["Bearerabc"],
    ["Bearer a b"],
    ["Token abc"],
    [" Bearer abc"],
  ])("finds no token in %j", (header) => {
    expect(parseBearer(header)).toBeUndefined();
  });
});
