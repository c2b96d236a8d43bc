import pino, { type DestinationStream, type Logger as PinoLogger } from "pino";

/** `SLUICE_LOG`: the lowest level written; `silent` writes nothing. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

/** The fields of one line: ids, counts and durations, never a secret (callers pass ids, not keys). */
export type LogFields = Record<string, unknown>;

/**
 * The logger every module takes, a thin face over pino: the message first and its fields
 * second, as our call sites read best, and `child` for lines that share fields (a call's
 * request id). Modules depend on this interface, not on pino.
 */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger whose every line also carries `bindings`, such as a call's `requestId`. */
  child(bindings: LogFields): Logger;
}

let stderrDestination: (DestinationStream & { flushSync(): void }) | undefined;

/**
 * The process's one stderr destination, made on first use: pino's asynchronous writer
 * (sonic-boom). A line is written at once when no write is in flight, and lines logged during
 * a write go out together in the next one, so a busy process makes few writes and a quiet one
 * shows each line without delay. What is left is flushed synchronously when the process
 * exits, so no line is lost on `process.exit`.
 */
function stderr(): DestinationStream {
  stderrDestination ??= pino.destination({ dest: 2, sync: false });
  return stderrDestination;
}

/**
 * Writes the lines logged so far now. Called before the start line goes to stdout, so that a
 * script that reads the start line finds every earlier log line (a start-up warning) on stderr.
 */
export function flushLogs(): void {
  try {
    stderrDestination?.flushSync();
  } catch {
    // Not open yet (nothing was written) or already closed at exit: nothing to flush.
  }
}

function wrap(p: PinoLogger): Logger {
  return {
    debug: (msg, fields) => (fields === undefined ? p.debug(msg) : p.debug(fields, msg)),
    info: (msg, fields) => (fields === undefined ? p.info(msg) : p.info(fields, msg)),
    warn: (msg, fields) => (fields === undefined ? p.warn(msg) : p.warn(fields, msg)),
    error: (msg, fields) => (fields === undefined ? p.error(msg) : p.error(fields, msg)),
    child: (bindings) => wrap(p.child(bindings)),
  };
}

/**
 * Builds a JSON-lines logger at or above `level`, writing to stderr through pino's
 * asynchronous destination, or to `write` (tests capture lines this way). Lines look like
 * `{"level":"info","time":"2026-11-22T10:00:00.000Z","msg":"rpc",...}`: a level name and an
 * ISO time, which log pipelines index without a mapping.
 */
export function createLogger(level: LogLevel, write?: (line: string) => void): Logger {
  const destination: DestinationStream = write === undefined ? stderr() : { write };
  return wrap(
    pino(
      {
        level,
        base: undefined,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      destination,
    ),
  );
}

/**
 * `logger.child(bindings)`, made only when a line is first written: a call's domain lines
 * (failures, warnings) are rare, and most calls should not pay for a child they never use.
 */
export function withFields(logger: Logger, bindings: LogFields): Logger {
  let child: Logger | undefined;
  const get = () => {
    child ??= logger.child(bindings);
    return child;
  };
  return {
    debug: (msg, fields) => get().debug(msg, fields),
    info: (msg, fields) => get().info(msg, fields),
    warn: (msg, fields) => get().warn(msg, fields),
    error: (msg, fields) => get().error(msg, fields),
    child: (more) => get().child(more),
  };
}

/** A logger that drops everything, for tests. */
export const silentLogger: Logger = createLogger("silent", () => undefined);
