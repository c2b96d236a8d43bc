import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ENTRY = fileURLToPath(new URL("./slow-app-main.ts", import.meta.url));

/** A Sluice app in a child Node process (see slow-app-main.ts), killable on purpose. */
export interface ChildApp {
  edgeUrl: string;
  coreUrl: string;
  child: ChildProcess;
  /** What the child wrote to stderr so far. */
  stderr(): string;
  /** SIGKILLs the child (a crash: no cleanup of any kind) and waits for it to exit. */
  kill(): Promise<void>;
  /** Stops the child if it still runs (SIGTERM, then SIGKILL after `graceMs`). */
  close(graceMs?: number): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Spawns the child app with `env` on top of the current environment and waits for its URLs. */
export async function startChildApp(env: Record<string, string>, timeoutMs = 20_000): Promise<ChildApp> {
  const child = spawn(process.execPath, [ENTRY], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const kill = async (signal: NodeJS.Signals) => {
    if (exited(child)) return;
    child.kill(signal);
    await gone;
  };

  try {
    const urls = await new Promise<{ edgeUrl: string; coreUrl: string }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`child app did not start within ${timeoutMs} ms; stderr:\n${stderr}`)),
        timeoutMs,
      );
      child.stdout?.on("data", (d: Buffer) => {
        stdout += d.toString();
        const line = stdout
          .split("\n")
          .slice(0, -1)
          .find((l) => l.startsWith("{"));
        if (line === undefined) return;
        clearTimeout(timer);
        try {
          const parsed = JSON.parse(line) as { edgeUrl?: unknown; coreUrl?: unknown };
          if (typeof parsed.edgeUrl !== "string" || typeof parsed.coreUrl !== "string")
            throw new Error(`bad start line: ${line}`);
          resolve({ edgeUrl: parsed.edgeUrl, coreUrl: parsed.coreUrl });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      child.once("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`child app exited (${code ?? signal}) before starting; stderr:\n${stderr}`));
      });
    });
    return {
      ...urls,
      child,
      stderr: () => stderr,
      kill: () => kill("SIGKILL"),
      async close(graceMs = 3000) {
        if (exited(child)) return;
        const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
        await kill("SIGTERM");
        clearTimeout(timer);
      },
    };
  } catch (err) {
    await kill("SIGKILL");
    throw err;
  }
}
