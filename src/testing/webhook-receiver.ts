import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/** One request a receiver got, with the status it answered and whether its signature checked out. */
export interface ReceivedWebhook {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The body parsed. */
  json: unknown;
  status: number;
  /** Whether the official `standardwebhooks` library verified it with the receiver's secret (false without one). */
  verified: boolean;
}

/** What the receiver answers the `index`-th request (from 0): a status, or "hang" to never answer. */
export type Respond = (index: number, body: string) => number | "hang";

/** A real HTTP endpoint for webhook tests (node:http on loopback), with what it received. */
export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Sets the secret requests are verified with (an endpoint's is known only once it is created). */
  setSecret(secret: string): void;
  /**
   * Resolves with what arrived once `done` holds, checked now and after every request: tests wait on
   * the receiver's events, never on a sleep. Rejects after `timeoutMs`, listing what arrived.
   */
  until(done: (received: ReceivedWebhook[]) => boolean, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

const header = (headers: IncomingHttpHeaders, name: string) => String(headers[name] ?? "");

/**
 * Starts a receiver that answers with `respond` (200 by default). Each request's signature is
 * checked with the official Standard Webhooks library, an implementation independent of Sluice's.
 */
export async function startWebhookReceiver(respond: Respond = () => 200): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const waiters = new Set<() => void>();
  let secret: string | undefined;
  let count = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const answer = respond(count++, body);
      if (answer === "hang") return;
      let verified = false;
      try {
        if (secret !== undefined) new Webhook(secret).verify(body, req.headers as Record<string, string>);
        verified = secret !== undefined;
      } catch {
        verified = false;
      }
      received.push({
        id: header(req.headers, "webhook-id"),
        timestamp: header(req.headers, "webhook-timestamp"),
        signature: header(req.headers, "webhook-signature"),
        body,
        json: JSON.parse(body) as unknown,
        status: answer,
        verified,
      });
      res.writeHead(answer).end();
      for (const wake of waiters) wake();
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    setSecret(value) {
      secret = value;
    },
    until(done, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!done(received)) return;
          finish();
          resolve([...received]);
        };
        const timer = setTimeout(() => {
          finish();
          reject(
            new Error(`the receiver got ${received.length} requests: ${JSON.stringify(received.map((r) => r.json))}`),
          );
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
