/** What `npm run soak -- ...` was asked to do. */
export interface SoakArgs {
  /** How long traffic and faults run, in ms (default 10 minutes). */
  durationMs: number;
  /** Seed of every random choice, so a run that found a breach can be repeated. */
  seed: number;
  /** Calls in flight at once. */
  concurrency: number;
}

const USAGE = `usage: npm run soak -- [--minutes N | --seconds N] [--seed N] [--concurrency N]
  --minutes N      run traffic and faults for N minutes (default 10)
  --seconds N      run for N seconds instead (for short development runs)
  --seed N         seed of every random choice (default: random, printed at start)
  --concurrency N  calls in flight at once (default 32)`;

/** Thrown for a bad command line; the message is the usage text. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** A non-negative number (above zero unless `zeroOk`), or a usage error naming the flag. */
function numberOf(flag: string, value: string | undefined, zeroOk: boolean): number {
  const n = Number(value);
  if (value === undefined || value.trim() === "" || !Number.isFinite(n) || n < 0 || (n === 0 && !zeroOk)) {
    throw new UsageError(`${flag} needs a ${zeroOk ? "non-negative" : "positive"} number\n${USAGE}`);
  }
  return n;
}
const positive = (flag: string, value: string | undefined) => numberOf(flag, value, false);

/**
 * Parses the soak's flags. Strict on purpose: a typo such as `--second 60` must not start a
 * ten-minute run on a shared machine.
 */
export function parseArgs(argv: readonly string[]): SoakArgs {
  const out: SoakArgs = { durationMs: 10 * 60_000, seed: Math.floor(Math.random() * 2 ** 31), concurrency: 32 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] ?? "";
    const [name, inline] = flag.includes("=") ? flag.split("=", 2) : [flag, undefined];
    const value = () => inline ?? argv[++i];
    switch (name) {
      case "--minutes":
        out.durationMs = Math.round(positive(name, value()) * 60_000);
        break;
      case "--seconds":
        out.durationMs = Math.round(positive(name, value()) * 1000);
        break;
      case "--seed":
        out.seed = Math.floor(numberOf(name, value(), true)) >>> 0;
        break;
      case "--concurrency":
        out.concurrency = Math.max(1, Math.floor(positive(name, value())));
        break;
      case "--help":
      case "-h":
        throw new UsageError(USAGE);
      default:
        throw new UsageError(`unknown argument ${flag}\n${USAGE}`);
    }
  }
  return out;
}
