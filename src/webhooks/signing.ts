import { createHmac, randomBytes } from "node:crypto";

/**
 * Webhook signatures as the Standard Webhooks specification defines them, so that receivers can
 * check them with any of its libraries: the secret is `whsec_` and base64 of random bytes, the key
 * is those bytes, and each attempt is signed over `${id}.${timestamp}.${body}` with HMAC-SHA256.
 */

/** The prefix of an endpoint secret, which is not part of the key. */
export const SECRET_PREFIX = "whsec_";

/** Random bytes in a new secret: the specification asks for 24 to 64. */
const SECRET_BYTES = 32;

/** A new endpoint secret, shown to the operator once and kept by the store to sign with. */
export function generateWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString("base64")}`;
}

/**
 * The `webhook-signature` value of one attempt: `v1,` and the base64 HMAC-SHA256, keyed by the
 * secret's decoded bytes, of `${id}.${timestampSeconds}.${body}`.
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`;
}

/**
 * The Standard Webhooks headers of one attempt: `webhook-id` (the same on every redelivery, so a
 * receiver drops repeats), `webhook-timestamp` (the attempt's time, in unix seconds, so a receiver
 * refuses replays of old ones) and `webhook-signature`.
 */
export function webhookHeaders(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<"webhook-id" | "webhook-timestamp" | "webhook-signature", string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": signWebhook(secret, id, timestampSeconds, body),
  };
}
