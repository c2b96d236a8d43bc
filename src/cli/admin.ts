import { parseArgs } from "node:util";
import { toJson, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  AdminService,
  GetAccountResponseSchema,
  CreateAccountResponseSchema,
  CreateApiKeyResponseSchema,
  ListApiKeysResponseSchema,
  ListUsageRecordsResponseSchema,
  PaymentStatus,
  RevokeApiKeyResponseSchema,
  RotateApiKeyResponseSchema,
  UpdateApiKeyResponseSchema,
  SubscriptionStatus,
  UpdateAccountResponseSchema,
  SearchAccountsResponseSchema,
  GetSpendByDayResponseSchema,
  CreateWebhookEndpointResponseSchema,
  ListWebhookEndpointsResponseSchema,
  DeleteWebhookEndpointResponseSchema,
  ListWebhookDeliveriesResponseSchema,
} from "../../gen/sluice/admin/v1/admin_service_pb.ts";
import { DEFAULT_CORE_URL } from "../dev-bootstrap.ts";
import { reasonOf } from "../errors/catalogue.ts";

const USAGE = `Usage: npm run admin -- <command> [options]

Commands:
  create-account [--email E] [--cap-usd D | --cap-micros M] [--onboarded]
  get-account <account-id>
  search-accounts <account-id | email>
  spend-by-day <account-id>
  update-account <account-id> [--cap-usd D | --cap-micros M] [--onboarding-complete true|false]
                 [--payment ok|failed] [--subscription active|canceled]
  create-key <account-id> [--rps R] [--burst B] [--expires-in-seconds N] [--cap-usd D | --cap-micros M] [--tpm N]
             (--cap-usd: the key's own monthly cap, besides its account's; --tpm: tokens per minute)
  update-key <api-key-id> [--cap-usd D | --cap-micros M | --no-cap] [--tpm N | --no-tpm]
             (changes or removes a key's own cap and token limit; what is not given is left alone)
  rotate-key <api-key-id> [--grace-seconds N] [--expires-in-seconds N]
             (a new secret for the same key; the old one keeps working --grace-seconds, default 0)
  revoke-key <api-key-id>
  list-keys <account-id>
  usage <account-id> [--page-size N] [--page-token T] [--all]
  create-webhook <url> [--account <account-id>]
             (spend alerts for that account, or for every account; prints the secret, once)
  list-webhooks
  delete-webhook <endpoint-id>
  webhook-deliveries <endpoint-id> [--page-size N]

Environment:
  SLUICE_ADMIN_TOKEN  the Admin bearer token (required)
  CORE_URL            the core's address (default ${DEFAULT_CORE_URL}, where npm start serves it)
`;

/** Thrown for a command line the CLI cannot act on; printed with the usage. */
class UsageError extends Error {}

/** Where the core is: `CORE_URL`, the variable an edge-only process reads too, or `npm start`'s default. */
function coreUrl(): string {
  const url = process.env.CORE_URL || DEFAULT_CORE_URL;
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new UsageError(`CORE_URL must be an http:// or https:// URL, such as ${DEFAULT_CORE_URL} (got "${url}")`);
  }
  return url;
}

function capMicros(values: { "cap-usd"?: string | undefined; "cap-micros"?: string | undefined }): bigint | undefined {
  if (values["cap-micros"] !== undefined) {
    if (!/^\d+$/.test(values["cap-micros"])) throw new UsageError("--cap-micros must be a whole number");
    return BigInt(values["cap-micros"]);
  }
  if (values["cap-usd"] !== undefined) {
    const usd = Number(values["cap-usd"]);
    if (!Number.isFinite(usd) || usd < 0) throw new UsageError("--cap-usd must be a non-negative number");
    return BigInt(Math.round(usd * 1_000_000));
  }
  return undefined;
}

/** `--tpm`: a key's tokens-per-minute limit, a whole number from 1, or undefined when absent. */
function tokensPerMinute(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError("--tpm must be a whole number of tokens >= 1");
  return Number(value);
}

/** A whole number of seconds given with `flag`, or undefined when the flag is absent. */
function seconds(value: string | undefined, flag: string): bigint | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} must be a whole number of seconds`);
  return BigInt(value);
}

/** `--expires-in-seconds` as the requests' `expiration` oneof (a ttl), when given. */
function expiration(value: string | undefined) {
  const ttl = seconds(value, "--expires-in-seconds");
  return ttl === undefined ? {} : { expiration: { case: "ttl" as const, value: { seconds: ttl } } };
}

function bool(value: string | undefined, flag: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== "true" && value !== "false") throw new UsageError(`${flag} must be true or false`);
  return value === "true";
}

function print<D extends DescMessage>(schema: D, message: MessageShape<D>): void {
  process.stdout.write(`${JSON.stringify(toJson(schema, message), null, 2)}\n`);
}

/** Runs one admin command against the core; the Admin API's own errors are printed as-is. */
async function run(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      email: { type: "string" },
      account: { type: "string" },
      "cap-usd": { type: "string" },
      "cap-micros": { type: "string" },
      onboarded: { type: "boolean" },
      "onboarding-complete": { type: "string" },
      payment: { type: "string" },
      subscription: { type: "string" },
      rps: { type: "string" },
      burst: { type: "string" },
      "expires-in-seconds": { type: "string" },
      "grace-seconds": { type: "string" },
      tpm: { type: "string" },
      "no-cap": { type: "boolean" },
      "no-tpm": { type: "boolean" },
      "page-size": { type: "string" },
      "page-token": { type: "string" },
      all: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, id] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(USAGE);
    return;
  }
  const token = process.env.SLUICE_ADMIN_TOKEN;
  if (!token) throw new UsageError("SLUICE_ADMIN_TOKEN is not set");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: coreUrl() }));
  const opts = { headers: { authorization: `Bearer ${token}` }, timeoutMs: 10_000 };
  const need = (value: string | undefined, what: string): string => {
    if (!value) throw new UsageError(`${command} needs ${what}`);
    return value;
  };
  const cap = capMicros(values);
  const tpm = tokensPerMinute(values.tpm);
  switch (command) {
    case "create-account":
      return print(
        CreateAccountResponseSchema,
        await admin.createAccount(
          {
            ...(values.email !== undefined && { email: values.email }),
            ...(cap !== undefined && { spendCapUsdMicros: cap }),
            onboardingComplete: values.onboarded === true,
          },
          opts,
        ),
      );
    case "get-account":
      return print(GetAccountResponseSchema, await admin.getAccount({ accountId: need(id, "an account id") }, opts));
    case "search-accounts":
      return print(
        SearchAccountsResponseSchema,
        await admin.searchAccounts({ query: need(id, "an account id or an email") }, opts),
      );
    case "spend-by-day":
      return print(
        GetSpendByDayResponseSchema,
        await admin.getSpendByDay({ accountId: need(id, "an account id") }, opts),
      );
    case "update-account": {
      const onboarded = bool(values["onboarding-complete"], "--onboarding-complete");
      const payment =
        values.payment === undefined
          ? undefined
          : { ok: PaymentStatus.OK, failed: PaymentStatus.FAILED }[values.payment];
      const subscription =
        values.subscription === undefined
          ? undefined
          : { active: SubscriptionStatus.ACTIVE, canceled: SubscriptionStatus.CANCELED }[values.subscription];
      if (values.payment !== undefined && payment === undefined) throw new UsageError("--payment must be ok or failed");
      if (values.subscription !== undefined && subscription === undefined)
        throw new UsageError("--subscription must be active or canceled");
      return print(
        UpdateAccountResponseSchema,
        await admin.updateAccount(
          {
            accountId: need(id, "an account id"),
            ...(cap !== undefined && { spendCapUsdMicros: cap }),
            ...(onboarded !== undefined && { onboardingComplete: onboarded }),
            ...(payment !== undefined && { paymentStatus: payment }),
            ...(subscription !== undefined && { subscriptionStatus: subscription }),
          },
          opts,
        ),
      );
    }
    case "create-key":
      return print(
        CreateApiKeyResponseSchema,
        await admin.createApiKey(
          {
            accountId: need(id, "an account id"),
            ...(values.rps !== undefined && { rateLimitRps: Number(values.rps) }),
            ...(values.burst !== undefined && { burst: Number(values.burst) }),
            ...expiration(values["expires-in-seconds"]),
            ...(cap !== undefined && { spendCapUsdMicros: cap }),
            ...(tpm !== undefined && { tokensPerMinute: tpm }),
          },
          opts,
        ),
      );
    case "update-key": {
      if (values["no-cap"] && cap !== undefined) throw new UsageError("--no-cap and a cap cannot go together");
      if (values["no-tpm"] && tpm !== undefined) throw new UsageError("--no-tpm and --tpm cannot go together");
      // The fields named change; one named and not given is removed (the update mask's rule).
      const paths = [
        ...(cap !== undefined || values["no-cap"] ? ["spend_cap_usd_micros"] : []),
        ...(tpm !== undefined || values["no-tpm"] ? ["tokens_per_minute"] : []),
      ];
      if (paths.length === 0)
        throw new UsageError("update-key needs --cap-usd, --cap-micros, --no-cap, --tpm or --no-tpm");
      return print(
        UpdateApiKeyResponseSchema,
        await admin.updateApiKey(
          {
            apiKeyId: need(id, "an api key id"),
            ...(cap !== undefined && { spendCapUsdMicros: cap }),
            ...(tpm !== undefined && { tokensPerMinute: tpm }),
            updateMask: { paths },
          },
          opts,
        ),
      );
    }
    case "rotate-key": {
      const grace = seconds(values["grace-seconds"], "--grace-seconds");
      return print(
        RotateApiKeyResponseSchema,
        await admin.rotateApiKey(
          {
            apiKeyId: need(id, "an api key id"),
            ...(grace !== undefined && { gracePeriod: { seconds: grace } }),
            ...expiration(values["expires-in-seconds"]),
          },
          opts,
        ),
      );
    }
    case "revoke-key":
      return print(RevokeApiKeyResponseSchema, await admin.revokeApiKey({ apiKeyId: need(id, "an api key id") }, opts));
    case "list-keys":
      return print(ListApiKeysResponseSchema, await admin.listApiKeys({ accountId: need(id, "an account id") }, opts));
    case "usage": {
      const accountId = need(id, "an account id");
      const pageSize = values["page-size"] === undefined ? 0 : Number(values["page-size"]);
      let pageToken = values["page-token"] ?? "";
      let pages = 0;
      let records = 0;
      do {
        const page = await admin.listUsageRecords({ accountId, pageSize, pageToken }, opts);
        print(ListUsageRecordsResponseSchema, page);
        pages += 1;
        records += page.usageRecords.length;
        pageToken = page.nextPageToken;
        if (values.all)
          process.stderr.write(
            `usage: ${records} records in ${pages} pages${pageToken ? ", more to come" : ", done"}\n`,
          );
      } while (values.all && pageToken);
      return;
    }
    case "create-webhook":
      return print(
        CreateWebhookEndpointResponseSchema,
        await admin.createWebhookEndpoint({ url: need(id, "a URL"), accountId: values.account ?? "" }, opts),
      );
    case "list-webhooks":
      return print(ListWebhookEndpointsResponseSchema, await admin.listWebhookEndpoints({}, opts));
    case "delete-webhook":
      return print(
        DeleteWebhookEndpointResponseSchema,
        await admin.deleteWebhookEndpoint({ endpointId: need(id, "an endpoint id") }, opts),
      );
    case "webhook-deliveries":
      return print(
        ListWebhookDeliveriesResponseSchema,
        await admin.listWebhookDeliveries(
          {
            endpointId: need(id, "an endpoint id"),
            pageSize: values["page-size"] === undefined ? 0 : Number(values["page-size"]),
          },
          opts,
        ),
      );
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

run(process.argv.slice(2)).catch((err: unknown) => {
  if (
    err instanceof UsageError ||
    (err instanceof TypeError && "code" in err && String(err.code).startsWith("ERR_PARSE_ARGS"))
  ) {
    process.stderr.write(`admin: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (err instanceof ConnectError) {
    const reason = reasonOf(err);
    // No ErrorInfo: the core never answered (refused, unresolvable, or silent past the timeout).
    if (reason === undefined && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded)) {
      process.stderr.write(
        `admin: cannot reach the core at ${coreUrl()} (${err.rawMessage}); ` +
          "start it with npm start, or set CORE_URL to its address\n",
      );
      process.exit(1);
    }
    process.stderr.write(`admin: ${Code[err.code]} ${reason ?? ""}: ${err.rawMessage}\n`);
    process.exit(1);
  }
  process.stderr.write(`admin: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
