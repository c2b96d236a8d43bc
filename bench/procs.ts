/**
 * Child processes of the benchmark suite and what it reads about them from /proc: every
 * process the suite starts is killed when the suite ends, whether it finishes, throws or is
 * interrupted, so a failed run never leaves a Sluice, an upstream or a Redis behind.
 */
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const startedAt = performance.now();

/** Writes one progress line to stderr with the time since the suite started. */
export function progress(message: string): void {
  const seconds = ((performance.now() - startedAt) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[${seconds} s] ${message}\n`);
}

/** Parent pid of every live process, read from /proc/<pid>/stat (Linux only). */
function parentsOf(): Map<number, number> {
  const parents = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name (field 2) may hold spaces and parentheses: fields resume after the last ")".
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parents.set(Number(entry), ppid);
    } catch {
      // The process exited while we looked.
    }
  }
  return parents;
}

/** `pid` and all of its descendants, parents first. */
export function processTree(pid: number): number[] {
  const parents = parentsOf();
  const tree = [pid];
  for (let i = 0; i < tree.length && i < 10_000; i++) {
    for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  }
  return tree.filter((p) => p === pid || parents.has(p));
}

/** A value in KiB from /proc/<pid>/status (VmRSS, VmHWM...), 0 when the process is gone. */
export function statusKiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return Number(match?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Resident memory of a process and its descendants (workers), in KiB. */
export const treeRssKiB = (pid: number): number => processTree(pid).reduce((sum, p) => sum + statusKiB(p, "VmRSS"), 0);

/** Open file descriptors of a process (sockets included). */
export function fdCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** The soft and hard "Max open files" of a process, from /proc/<pid>/limits. */
export function openFileLimit(pid: number): { soft: number; hard: number } {
  const line = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
  const value = (s: string | undefined) => (s === undefined || s === "unlimited" ? Number.MAX_SAFE_INTEGER : Number(s));
  return { soft: value(line?.[1]), hard: value(line?.[2]) };
}

/** Kills every descendant of this process at once (SIGKILL): the last resort on exit. */
function killDescendants(): void {
  for (const pid of processTree(process.pid).slice(1).reverse()) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

process.once("exit", killDescendants);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    progress(`${signal}: stopping every child process`);
    killDescendants();
    process.exit(130);
  });
}

/** A child process started by the suite. */
export interface Child {
  proc: ChildProcess;
  pid: number;
  /** Resolves with the first stdout line that `match` accepts (fails on exit or timeout). */
  line(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Every complete stdout line so far (the first 10,000). */
  lines(): readonly string[];
  /** SIGTERM (or closing stdin first when `viaStdin`), then SIGKILL of the whole tree after `graceMs`. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Spawns a child whose stdout is read line by line (and then drained, so it never blocks)
 * and whose stderr goes where `stderr` says: "inherit", "ignore" or an open file descriptor.
 */
export function startChild(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  stderr: "inherit" | "ignore" | number = "inherit",
): Child {
  const stdio: StdioOptions = ["pipe", "pipe", stderr];
  const proc = spawn(process.execPath, args, { env, stdio });
  if (proc.pid === undefined) throw new Error(`${name}: could not be started`);
  const pid = proc.pid;
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let partial = "";
  proc.stdout?.on("data", (d: Buffer) => {
    partial += d.toString();
    const parts = partial.split("\n");
    partial = parts.pop() ?? "";
    for (const l of parts) if (lines.length < 10_000) lines.push(l);
    for (const wake of waiters) wake();
  });
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.once("exit", () => {
    for (const wake of waiters) wake();
  });
  const gone = () => proc.exitCode !== null || proc.signalCode !== null;

  return {
    proc,
    pid,
    lines: () => lines,
    line(match, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${name}: no expected output within ${timeoutMs} ms`));
        }, timeoutMs);
        const check = () => {
          const found = lines.find(match);
          if (found !== undefined || gone()) {
            clearTimeout(timer);
            waiters.delete(check);
            if (found !== undefined) resolve(found);
            else reject(new Error(`${name}: exited (${proc.exitCode ?? proc.signalCode}) before it started`));
          }
        };
        waiters.add(check);
        check();
      });
    },
    async close(graceMs = 15_000) {
      if (gone()) return;
      const tree = processTree(pid);
      proc.stdin?.end();
      proc.kill("SIGTERM");
      const timer = setTimeout(() => {
        for (const p of [...tree].reverse()) {
          try {
            process.kill(p, "SIGKILL");
          } catch {
            /* gone */
          }
        }
      }, graceMs);
      await exited;
      clearTimeout(timer);
      // Workers that outlived their parent.
      for (const p of tree.slice(1)) {
        try {
          process.kill(p, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    },
  };
}
