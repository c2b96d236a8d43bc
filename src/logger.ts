import { createTickBatcher, type TickBatcher } from "./tick-batcher.ts";

/**
 * JSON-lines logger on stderr. Tiny on purpose: one line per event, with fields that log
 * pipelines can index, and never a secret (callers pass ids, not keys).
 */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** Bytes a batch holds before it is written at once, so a burst never buffers without bound. */
const BATCH_BYTES = 64 * 1024;

let stderrWriter: TickBatcher | undefined;
/**
 * The process's one stderr destination, made on first use. stderr on a file or a pipe is
 * written synchronously, one syscall per line: on the hot path that was one or two per RPC.
 * Batched per tick, the lines of every call finished in a tick cost one write; what is left
 * is written synchronously at process exit, so no line is lost on `process.exit`.
 */
const stderr = (line: string) => {
  if (!stderrWriter) {
    const writer = createTickBatcher((t) => process.stderr.write(t), BATCH_BYTES);
    process.once("exit", writer.flush);
    stderrWriter = writer;
  }
  stderrWriter.push(line);
};

/**
 * Writes the lines logged so far now. Called before the start line goes to stdout, so that a
 * script that reads the start line finds every earlier log line (a start-up warning) on stderr.
 */
export function flushLogs(): void {
  stderrWriter?.flush();
}

/** Builds a logger writing to `write` (batched stderr by default) at or above `level`. */
export function createLogger(level: LogLevel, write: (line: string) => void = stderr): Logger {
  const at = (lvl: Exclude<LogLevel, "silent">) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < RANK[level]) return;
    const time = new Date().toISOString();
    if (fields !== undefined && ("time" in fields || "level" in fields || "msg" in fields)) {
      write(`${JSON.stringify({ time, level: lvl, msg, ...fields })}\n`);
      return;
    }
    // The same line as stringifying `{ time, level, msg, ...fields }`, without copying the
    // fields into a new object: one line per RPC makes this the hot path of logging.
    const rest = fields === undefined ? "{}" : JSON.stringify(fields);
    write(
      `{"time":"${time}","level":"${lvl}","msg":${JSON.stringify(msg)}${rest.length > 2 ? `,${rest.slice(1)}` : "}"}\n`,
    );
  };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A logger that drops everything, for tests. */
export const silentLogger: Logger = createLogger("silent");
