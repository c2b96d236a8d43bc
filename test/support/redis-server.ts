import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A `redis-server` owned by one test file: its own port and directory, killable on purpose. */
export interface RedisServer {
  url: string;
  port: number;
  /** Stops the server (SIGKILL when `hard`), keeping the port for a restart. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port (with an empty dataset unless AOF is on). */
  start(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open and nothing answers, as with a hung host. */
  freeze(): void;
  /** Thaws a frozen server (SIGCONT): it runs every command that queued up meanwhile. */
  thaw(): void;
  close(): Promise<void>;
}

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
}

/** Whether a Redis server answers PING on the port (the soak uses it too). */
export function pingRedis(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

/**
 * The command line of a loopback redis-server on `port` keeping its files in `dir`: no RDB
 * snapshots, the append-only file when asked (fsync on every write, so a SIGKILL loses nothing
 * acknowledged), in the foreground, warnings only. The tests and the soak start theirs alike.
 */
export function redisServerArgs(options: { port: number; dir: string; appendonly: boolean }): string[] {
  return [
    "--port",
    String(options.port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--dir",
    options.dir,
    "--appendonly",
    options.appendonly ? "yes" : "no",
    "--appendfsync",
    "always",
    "--daemonize",
    "no",
    "--loglevel",
    "warning",
  ];
}

/**
 * Spawns `redis-server` on a free port. Fails loudly when the binary is missing: Redis suites
 * must never skip quietly (`.ci/run` installs it with apt).
 */
export async function startRedisServer(
  options: { appendonly?: boolean; cluster?: boolean } = {},
): Promise<RedisServer> {
  const probe = spawnSync("redis-server", ["--version"]);
  if (probe.error || probe.status !== 0) {
    throw new Error(
      "redis-server is not installed or not on PATH: install it (apt-get install redis-server); Redis tests never skip",
    );
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "sluice-redis-"));
  let child: ChildProcess | undefined;
  const args = [
    ...redisServerArgs({ port, dir, appendonly: options.appendonly === true }),
    ...(options.cluster ? ["--cluster-enabled", "yes", "--cluster-config-file", join(dir, "nodes.conf")] : []),
  ];

  const start = async () => {
    child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.stderr?.on("data", (d: Buffer) => {
      output += d.toString();
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
      if (await pingRedis(port)) return;
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${port}: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const stop = async (hard = false) => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    c.kill("SIGCONT");
    c.kill(hard ? "SIGKILL" : "SIGTERM");
    await once(c, "exit");
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop,
    start,
    freeze: () => void child?.kill("SIGSTOP"),
    thaw: () => void child?.kill("SIGCONT"),
    async close() {
      await stop(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
