import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "../gen/sluice/admin/v1/admin_service_pb.ts";

/** The dev account's cap: $10 in micros, as DESIGN pins. */
export const DEV_CAP_USD_MICROS = 10_000_000n;

/** What the bootstrap made, to print once. */
export interface DevCredentials {
  accountId: string;
  apiKey: string;
}

/**
 * Creates the dev account and key through the Admin API itself, so the bootstrap obeys the
 * same rules as any operator and needs no back door into the store.
 */
export async function bootstrapDevAccount(coreUrl: string, adminToken: string): Promise<DevCredentials> {
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl }));
  const headers = { authorization: `Bearer ${adminToken}` };
  const { account } = await admin.createAccount({ onboardingComplete: true, spendCapUsdMicros: DEV_CAP_USD_MICROS }, { headers });
  if (!account) throw new Error("CreateAccount returned no account");
  const { secret } = await admin.createApiKey({ accountId: account.id }, { headers });
  return { accountId: account.id, apiKey: secret };
}

/** The lines `npm start` prints for a newcomer: the key, the admin token and a working curl. */
export function devBanner(edgeUrl: string, coreUrl: string, creds: DevCredentials, adminToken: string): string {
  return [
    "",
    "Sluice dev bootstrap: an onboarded account with a $10 cap and one API key (shown once).",
    `  account      ${creds.accountId}`,
    `  API key      ${creds.apiKey}`,
    `  admin token  ${adminToken}`,
    "",
    "Try it:",
    `  curl -s ${edgeUrl}/v1/chat/completions -H 'Authorization: Bearer ${creds.apiKey}' -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"What is Sluice?"}]}'`,
    "",
    `  export OPENAI_BASE_URL=${edgeUrl}/v1 OPENAI_API_KEY=${creds.apiKey} SLUICE_ADMIN_TOKEN=${adminToken} SLUICE_CORE_URL=${coreUrl}`,
    "",
  ].join("\n");
}
