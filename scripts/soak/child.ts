import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";

/** Every child the soak has spawned and not yet seen exit, for the last-resort kill on exit. */
const live = new Set<ChildProcess>();

/**
 * SIGKILLs every child still alive, synchronously. Runs from `process.on("exit")`, where
 * nothing asynchronous can happen any more, so no redis-server or Sluice outlives the soak
 * even when it dies of an error.
 */
export function killAllChildrenSync(): void {
  for (const c of live) {
    try {
      if (c.pid !== undefined) process.kill(c.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  live.clear();
}

/** How to start one kind of child and how to know it is ready. */
export interface ChildSpec {
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Ready once stdout matches (Sluice and the upstreams print their URL). */
  readyLine?: RegExp;
  /** Or ready once this answers true (redis-server: PING). */
  readyProbe?: () => Promise<boolean>;
  timeoutMs?: number;
  /** Also receives everything the child writes to stderr. */
  onStderr?: (text: string) => void;
}

/**
 * One child process the soak owns and hurts on purpose: it can be SIGKILLed, SIGSTOPped and
 * SIGCONTed, and started again with the same command (so the same port). Children run in
 * their own process group, so a Ctrl-C at the terminal reaches only the soak, which then
 * decides what to stop and in which order.
 */
export interface ManagedChild {
  readonly name: string;
  /** The stdout match that made it ready (e.g. the URL line), from the latest start. */
  readonly readyMatch: RegExpExecArray | undefined;
  running(): boolean;
  frozen(): boolean;
  start(): Promise<void>;
  /** SIGKILL, then wait for the exit. */
  kill(): Promise<void>;
  freeze(): void;
  thaw(): void;
  /** SIGCONT and SIGTERM, then SIGKILL once `graceMs` has passed. */
  stop(graceMs?: number): Promise<void>;
  /** The last few KB of its stdout and stderr. */
  tail(): string;
  /** Exits the soak did not cause (a crash). */
  unexpectedExits(): number;
}

const TAIL_BYTES = 8_192;

/** Creates (does not start) a managed child. */
export function managedChild(spec: ChildSpec): ManagedChild {
  let child: ChildProcess | undefined;
  let isFrozen = false;
  let output = "";
  let crashes = 0;
  let expectingExit = false;
  let readyMatch: RegExpExecArray | undefined;
  const append = (d: Buffer) => {
    output = (output + d.toString()).slice(-TAIL_BYTES);
  };
  const alive = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const start = async (): Promise<void> => {
    if (alive()) return;
    const c = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    child = c;
    isFrozen = false;
    expectingExit = false;
    live.add(c);
    let stdout = "";
    c.stdout?.on("data", (d: Buffer) => {
      append(d);
      if (stdout.length < 4096) stdout += d.toString();
    });
    c.stderr?.on("data", (d: Buffer) => {
      append(d);
      spec.onStderr?.(d.toString());
    });
    c.on("exit", () => {
      live.delete(c);
      if (!expectingExit && child === c) crashes += 1;
    });
    c.on("error", (err) => append(Buffer.from(`spawn error: ${err.message}\n`)));
    const deadline = Date.now() + (spec.timeoutMs ?? 30_000);
    for (;;) {
      if (c.exitCode !== null || c.signalCode !== null)
        throw new Error(`${spec.name} exited while starting:\n${output}`);
      const m = spec.readyLine?.exec(stdout);
      if (m) {
        readyMatch = m;
        return;
      }
      if (spec.readyProbe && (await spec.readyProbe())) return;
      if (Date.now() > deadline) {
        expectingExit = true;
        c.kill("SIGKILL");
        throw new Error(`${spec.name} was not ready within ${spec.timeoutMs ?? 30_000} ms:\n${output}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const signal = (sig: NodeJS.Signals) => {
    if (alive() && child?.pid !== undefined) process.kill(child.pid, sig);
  };

  const kill = async (): Promise<void> => {
    const c = child;
    if (!c || !alive()) return;
    expectingExit = true;
    const exited = once(c, "exit");
    signal("SIGKILL");
    await exited;
    isFrozen = false;
  };

  return {
    name: spec.name,
    get readyMatch() {
      return readyMatch;
    },
    running: alive,
    frozen: () => isFrozen && alive(),
    start,
    kill,
    freeze() {
      signal("SIGSTOP");
      isFrozen = true;
    },
    thaw() {
      signal("SIGCONT");
      isFrozen = false;
    },
    async stop(graceMs = 3_000) {
      const c = child;
      if (!c || !alive()) return;
      expectingExit = true;
      const exited = once(c, "exit");
      signal("SIGCONT");
      signal("SIGTERM");
      const timer = setTimeout(() => signal("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
      isFrozen = false;
      c.stdin?.destroy();
    },
    tail: () => output,
    unexpectedExits: () => crashes,
  };
}
