import { hash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * API key format: `svc_sk_` + 43 base62 characters of randomness (256 bits drawn, at least
 * 190 kept) + a 6-character base62 checksum of that random part. The checksum lets a typo
 * or a foreign string be refused without a store lookup.
 */
export const KEY_PREFIX = "svc_sk_";
const RANDOM_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SHAPE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);

function toBase62(value: bigint, length: number): string {
  let out = "";
  let v = value;
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(v % 62n)] + out;
    v /= 62n;
  }
  return out;
}

/** 62^CHECKSUM_LENGTH: the checksum is the digest's first 64 bits modulo this, in base 62. */
const CHECKSUM_MODULUS = 62n ** BigInt(CHECKSUM_LENGTH);
const CHECKSUM_ZEROS = "0".repeat(CHECKSUM_LENGTH);

/**
 * The checksum of a key's random part. Every keyed call checks one, so the base-62 digits are
 * made with one BigInt reduction and number arithmetic (62^6 is below 2^53), not six BigInt
 * divisions: the same digits as `toBase62(value, CHECKSUM_LENGTH)`, at a fraction of the cost.
 */
function checksum(random: string): string {
  // The one-shot `hash` (no Hash object): every keyed call pays for it; same digest.
  const digest = hash("sha256", random, "buffer");
  let v = Number(digest.readBigUInt64BE(0) % CHECKSUM_MODULUS);
  let out = "";
  while (v > 0) {
    out = ALPHABET[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return (CHECKSUM_ZEROS + out).slice(-CHECKSUM_LENGTH);
}

/** A new secret; shown to its owner once and never stored. */
export function generateApiKey(): string {
  const random = toBase62(BigInt(`0x${randomBytes(32).toString("hex")}`), RANDOM_LENGTH);
  return `${KEY_PREFIX}${random}${checksum(random)}`;
}

/** Whether a string is shaped like a key and its checksum matches; no store needed. */
export function isWellFormedApiKey(secret: string): boolean {
  if (!SHAPE.test(secret)) return false;
  const body = secret.slice(KEY_PREFIX.length);
  const random = body.slice(0, RANDOM_LENGTH);
  const given = Buffer.from(body.slice(RANDOM_LENGTH));
  return timingSafeEqual(given, Buffer.from(checksum(random)));
}

/** The stored form of a key: hex SHA-256. A 256-bit random secret needs no slow hash. */
export function hashApiKey(secret: string): string {
  return hash("sha256", secret, "hex");
}

/** The visible prefix of a key, to recognise it in listings. */
export function displayPrefix(secret: string): string {
  return secret.slice(0, KEY_PREFIX.length + 6);
}
