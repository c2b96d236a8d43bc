import { randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";
import type { Config } from "./config/index.ts";

/** The dev account's cap: $10 in micros, as DESIGN pins. */
export const DEV_CAP_USD_MICROS = 10_000_000n;

/** Where a process on a made-up admin token binds when `HOST` is unset: this machine only. */
export const DEV_HOST = "127.0.0.1";

declare const madeUp: unique symbol;

/**
 * An admin token this process made up itself. It is the only kind `devBanner` accepts, so the
 * type system keeps an operator's `SLUICE_ADMIN_TOKEN` from ever reaching stdout.
 */
export type MadeUpAdminToken = string & { readonly [madeUp]: true };

/** How `npm start` runs: the config to start with, and the made-up token if there is one. */
export interface DevStart {
  config: Config;
  /** Set only on a developer's first run; the dev bootstrap runs only then. */
  madeUpToken: MadeUpAdminToken | undefined;
}

/**
 * Decides whether this start is a developer's first run (memory store, `SLUICE_DEV_BOOTSTRAP`
 * `auto`, no operator token). Only then is an admin token made up, and because anyone who
 * reaches Admin with it owns every account, such a process binds loopback unless `HOST`
 * says otherwise. An operator's config is returned untouched.
 */
export function planDevStart(config: Config): DevStart {
  const memoryStore = config.REDIS_URL === undefined && config.CORE_URL === undefined;
  if (!memoryStore || config.SLUICE_DEV_BOOTSTRAP !== "auto" || config.SLUICE_ADMIN_TOKEN !== undefined) {
    return { config, madeUpToken: undefined };
  }
  const madeUpToken = `dev_${randomBytes(24).toString("base64url")}` as MadeUpAdminToken;
  return { config: { ...config, SLUICE_ADMIN_TOKEN: madeUpToken, HOST: config.HOST ?? DEV_HOST }, madeUpToken };
}

/** Where `npm start` serves the core unless `GRPC_PORT` says otherwise; `npm run admin` looks there. */
export const DEFAULT_CORE_URL = "http://127.0.0.1:50051";

/** What the bootstrap made, to print once. */
export interface DevCredentials {
  accountId: string;
  apiKey: string;
}

/**
 * Creates the dev account and key through the Admin API itself, so the bootstrap obeys the
 * same rules as any operator and needs no back door into the store. `npm start` calls it only
 * on a store without accounts (`Store.hasAccounts`), so a store that already has some is never
 * given a second dev account.
 */
export async function bootstrapDevAccount(coreUrl: string, adminToken: MadeUpAdminToken): Promise<DevCredentials> {
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl }));
  const headers = { authorization: `Bearer ${adminToken}` };
  const { account } = await admin.createAccount(
    { onboardingComplete: true, spendCapUsdMicros: DEV_CAP_USD_MICROS },
    { headers },
  );
  if (!account) throw new Error("CreateAccount returned no account");
  const { secret } = await admin.createApiKey({ accountId: account.id }, { headers });
  return { accountId: account.id, apiKey: secret };
}

/**
 * The lines `npm start` prints for a newcomer: the key, the admin token, a working curl, an
 * `export` line and an admin command. It takes only a made-up token: printing an operator's
 * token would leak it into logs. The export line leaves `CORE_URL` out on purpose: in the
 * shell it is pasted into, it would make the next `npm start` an edge-only process pointed at
 * this core. The admin command sets `CORE_URL` for itself alone, and only when the core is not
 * where the CLI looks by default.
 */
export function devBanner(
  urls: { edgeUrl: string; coreUrl: string; publicUrl: string },
  creds: DevCredentials,
  adminToken: MadeUpAdminToken,
): string {
  const { edgeUrl, coreUrl, publicUrl } = urls;
  return [
    "",
    "Sluice dev bootstrap: an onboarded account with a $10 cap and one API key (shown once).",
    `  account      ${creds.accountId}`,
    `  API key      ${creds.apiKey}`,
    `  admin token  ${adminToken}`,
    `  core         ${coreUrl} (gRPC, Connect and gRPC-Web; the Admin API lives here)`,
    `  console      ${publicUrl}/console (sign in with the API key, or with the admin token as an operator)`,
    "",
    "Try it:",
    `  curl -s ${edgeUrl}/v1/chat/completions -H 'Authorization: Bearer ${creds.apiKey}' ` +
      `-H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"What is Sluice?"}]}'`,
    "",
    "Then, for the README tour (curl, the openai SDK, npm run admin), paste into your shell:",
    `  export OPENAI_BASE_URL=${edgeUrl}/v1 OPENAI_API_KEY=${creds.apiKey} SLUICE_ADMIN_TOKEN=${adminToken}`,
    `  ${coreUrl === DEFAULT_CORE_URL ? "" : `CORE_URL=${coreUrl} `}npm run admin -- get-account ${creds.accountId}`,
    "",
  ].join("\n");
}
