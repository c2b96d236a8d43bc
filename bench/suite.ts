/**
 * The benchmark suite of issue 8 item 6, in one run and side by side: the fake upstream
 * called directly, the floor proxy, and Sluice on memory, on Redis and on Redis with 2
 * workers, each for JSON and SSE at every concurrency; then Sluice's memory with many open
 * streams, the extractive engine on a 32K-token input and the refusal of an oversized body.
 * Every server runs in its own process; the load generator (autocannon) runs in this one.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { startRedisServer, type RedisServer } from "../test/support/redis-server.ts";
import { load, type Target } from "./cannon.ts";
import { measureOpenStreams } from "./open-streams.ts";
import { progress, startChild, type Child } from "./procs.ts";
import { measureRefusal } from "./refuse-body.ts";
import {
  checkTargets,
  FLOOR,
  SLUICE_MEMORY,
  SLUICE_REDIS,
  type ExtractiveRow,
  type LoadRow,
  type SuiteResults,
} from "./report.ts";
import { startSluice, type SluiceProc } from "./sluice-proc.ts";

/** What `bench/run.ts` parsed from its flags. */
export interface SuiteOptions {
  seconds: number;
  warmupSeconds: number;
  /** Load in each mode on a freshly started server before its first window. */
  processWarmupSeconds: number;
  connections: number[];
  streams: number;
  extractiveIterations: number;
  refusalRuns: { declared: number; chunked: number };
  quick: boolean;
  command: string;
}

const MODES = ["JSON", "SSE"] as const;

const chatBody = (model: string, stream: boolean) =>
  JSON.stringify({
    model,
    stream,
    max_tokens: 64,
    ...(stream && { stream_options: { include_usage: true } }),
    messages: [
      { role: "system", content: "You are the benchmark's model. Answer in sixteen words." },
      { role: "user", content: "How does a gateway meter spend without slowing every call down?" },
    ],
  });

/** A stream counts only if it ended with [DONE] and carried no error event. */
const completeStream = (body: string) => body.includes("data: [DONE]") && !body.includes("event: error");
/** A JSON answer counts only if it is a completion with usage. */
const completeJson = (body: string) => body.includes('"chat.completion"') && body.includes('"usage"');

/** Starts a bench script as a child that prints its URL as its first stdout line. */
async function startServer(
  name: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ child: Child; url: string }> {
  const child = startChild(name, args, { ...process.env, ...env });
  const url = await child.line((l) => l.startsWith("http://"), 20_000);
  return { child, url: url.trim() };
}

function gitState(): { commit: string; dirty: boolean } {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain"], { encoding: "utf8" }).trim().length > 0;
    return { commit, dirty };
  } catch {
    return { commit: "unknown", dirty: false };
  }
}

/** Runs the suite and returns its results (targets included); throws only on set-up failure. */
export async function runSuite(options: SuiteOptions): Promise<SuiteResults> {
  const started = new Date();
  const t0 = performance.now();
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-"));
  const children: Child[] = [];
  let redis: RedisServer | undefined;
  const notes: string[] = [];
  const load_: LoadRow[] = [];
  const floorRuns: LoadRow[][] = [];
  const scenarios: SuiteResults["scenarios"] = [];
  let extractive: SuiteResults["extractive"] = null;
  let refusal: SuiteResults["refusal"] = null;
  let openStreams: SuiteResults["openStreams"] = null;
  const errorOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

  const targetOf = (url: string, authorization: string, mode: "JSON" | "SSE"): Target => ({
    url,
    headers: { authorization, "content-type": "application/json" },
    body: chatBody("bench-upstream", mode === "SSE"),
    verify: mode === "SSE" ? completeStream : completeJson,
  });

  /** A freshly started server is loaded in both modes first, so no window measures a cold JIT. */
  const warmProcess = async (name: string, url: string, authorization: string) => {
    if (options.processWarmupSeconds <= 0) return;
    progress(
      `${name}: warming the new process up ` +
        `(${options.processWarmupSeconds} s JSON + ${options.processWarmupSeconds} s SSE at c=32)`,
    );
    for (const mode of MODES) await load(targetOf(url, authorization, mode), 32, options.processWarmupSeconds);
  };

  const measureTarget = async (
    target: string,
    url: string,
    authorization: string,
    sluice?: SluiceProc,
  ): Promise<LoadRow[]> => {
    const rows: LoadRow[] = [];
    for (const mode of MODES) {
      for (const connections of options.connections) {
        const t = targetOf(url, authorization, mode);
        progress(
          `${target}, ${mode}, c=${connections}: warm-up ${options.warmupSeconds} s, measure ${options.seconds} s`,
        );
        if (options.warmupSeconds > 0) await load(t, connections, options.warmupSeconds);
        const commandsBefore = await sluice?.redisCommands();
        const logBefore = sluice?.logBytes();
        const figures = await load(t, connections, options.seconds);
        const row: LoadRow = { target, mode, connections, figures };
        if (sluice !== undefined && figures.completed > 0) {
          const commands = (await sluice.redisCommands()) - (commandsBefore ?? Number.NaN);
          if (Number.isFinite(commands)) row.redisCommandsPerCall = commands / figures.completed;
          row.logBytesPerCall = (sluice.logBytes() - (logBefore ?? 0)) / figures.completed;
        }
        const bad = figures.errors + figures.non2xx + figures.badBodies;
        const problems =
          bad > 0
            ? `, ${figures.errors} errors, ${figures.badBodies} bad bodies, ` +
              `${figures.non2xx} non-2xx ${JSON.stringify(figures.statusCodes)}`
            : "";
        progress(
          `  ${figures.rps.toFixed(0)} req/s, p50 ${figures.p50.toFixed(3)} ms, ` +
            `p99 ${figures.p99.toFixed(3)} ms${problems}`,
        );
        rows.push(row);
      }
    }
    return rows;
  };

  try {
    // The engine first, alone on the machine; it also writes the 32K-token input for Sluice.
    const conversation = join(dir, "conversation.json");
    let engine: ExtractiveRow[] = [];
    try {
      progress(`extractive engine: 32K-token input, ${options.extractiveIterations} iterations per scenario`);
      const out = execFileSync(
        process.execPath,
        [
          "bench/extractive.bench.ts",
          "--json",
          "--iterations",
          String(options.extractiveIterations),
          "--conversation",
          conversation,
        ],
        { encoding: "utf8" },
      );
      engine = (JSON.parse(out.trim().split("\n").pop() ?? "{}") as { rows: ExtractiveRow[] }).rows;
      extractive = { engine, throughSluiceMedianMs: null, throughSluiceStatus: null };
    } catch (err) {
      extractive = { error: errorOf(err) };
    }

    progress("starting the fake upstreams and the floor proxy");
    const fast = await startServer("fake upstream", ["bench/fake-upstream.ts"], { PORT: "0" });
    children.push(fast.child);
    const floor = await startServer("floor proxy", ["bench/floor-proxy.ts"], {
      PORT: "0",
      UPSTREAM: new URL(fast.url).origin,
    });
    children.push(floor.child);
    const modelsFile = join(dir, "models.json");
    writeFileSync(
      modelsFile,
      JSON.stringify({
        models: [
          {
            name: "bench-upstream",
            engine: "openai",
            baseUrl: fast.url,
            upstreamModel: "bench-upstream",
            inputUsdMicrosPerMillion: 200_000,
            outputUsdMicrosPerMillion: 600_000,
          },
          {
            name: "service-extract",
            engine: "extractive",
            inputUsdMicrosPerMillion: 1_000_000,
            outputUsdMicrosPerMillion: 2_000_000,
          },
        ],
      }),
    );

    await warmProcess("fake upstream", `${fast.url}/chat/completions`, "Bearer bench");
    load_.push(...(await measureTarget("fake upstream, direct", `${fast.url}/chat/completions`, "Bearer bench")));
    const floorAt = load_.length;
    await warmProcess(FLOOR, `${floor.url}/v1/chat/completions`, "Bearer bench");
    floorRuns.push(await measureTarget(FLOOR, `${floor.url}/v1/chat/completions`, "Bearer bench"));

    progress("starting redis-server");
    let redisError: string | undefined;
    redis = await startRedisServer().catch((err: unknown) => {
      redisError = errorOf(err);
      return undefined;
    });
    const plans: Array<{ target: string; redis: boolean; workers?: number }> = [
      { target: SLUICE_MEMORY, redis: false },
      { target: SLUICE_REDIS, redis: true },
      { target: "Sluice, Redis, 2 workers", redis: true, workers: 2 },
    ];
    for (const plan of plans) {
      let sluice: SluiceProc | undefined;
      try {
        if (plan.redis && redis === undefined) throw new Error(`no Redis to run on: ${redisError ?? "unknown"}`);
        progress(`starting ${plan.target}`);
        sluice = await startSluice({
          label: plan.target,
          modelsFile,
          dir,
          ...(plan.redis && redis !== undefined && { redisUrl: redis.url }),
          ...(plan.workers !== undefined && { workers: plan.workers }),
        });
        let label = plan.target;
        if (plan.workers !== undefined) {
          if (sluice.processes === plan.workers + 1)
            label = `${plan.target} (primary + ${plan.workers} worker processes)`;
          else if (sluice.processes > 1) label = `${plan.target} (${sluice.processes} processes)`;
          else if (sluice.workerLogLines.length > 0) label = `${plan.target} (1 process; its log mentions workers)`;
          else label = `${plan.target} (workers not implemented: ran 1 process)`;
          const redisNote =
            sluice.processes > 1 ? " (Redis commands per call not shown: /metrics answers from one process only)" : "";
          const logNote =
            sluice.workerLogLines.length > 0
              ? `; log lines about workers: ${sluice.workerLogLines.map((l) => l.slice(0, 160)).join(" / ")}`
              : "; no log line mentions workers";
          notes.push(
            `SLUICE_WORKERS=${plan.workers}: Sluice's process tree had ${sluice.processes} process(es) after start-up` +
              `${redisNote}${logNote}.`,
          );
        }
        scenarios.push({ target: plan.target, processes: sluice.processes, label });
        await warmProcess(plan.target, `${sluice.edgeUrl}/v1/chat/completions`, sluice.authorization);
        const rows = await measureTarget(label, `${sluice.edgeUrl}/v1/chat/completions`, sluice.authorization, sluice);
        // The targets refer to the scenario, whatever its label says about workers.
        load_.push(...rows);
        if (plan.target === SLUICE_MEMORY) {
          progress("refusing bodies over 32 MiB (declared and chunked)");
          refusal = await measureRefusal(sluice.edgeUrl, sluice.authorization, options.refusalRuns, fast.url).catch(
            (err: unknown) => ({ error: errorOf(err) }),
          );
          if (extractive !== null && !("error" in extractive)) {
            progress("extractive engine end to end through Sluice (32K-token input, JSON)");
            const end = await throughSluice(sluice, conversation, Math.min(options.extractiveIterations, 10)).catch(
              (err: unknown) => ({ medianMs: null, status: `failed: ${errorOf(err)}` }),
            );
            extractive.throughSluiceMedianMs = end.medianMs;
            extractive.throughSluiceStatus = end.status;
          }
        }
      } catch (err) {
        progress(`${plan.target} failed: ${errorOf(err)}`);
        scenarios.push({ target: plan.target, processes: 0, label: plan.target, error: errorOf(err) });
        notes.push(`${plan.target} failed: ${errorOf(err).split("\n")[0] ?? ""}`);
      } finally {
        await sluice?.close();
      }
      // The floor again after each scenario, so its mean spans the same stretch of a shared machine.
      floorRuns.push(await measureTarget(FLOOR, `${floor.url}/v1/chat/completions`, "Bearer bench"));
    }
    load_.splice(floorAt, 0, ...meanOfRuns(floorRuns));
    notes.push(floorSpread(floorRuns));

    if (options.streams > 0) {
      const hold = await startServer("fake upstream (hold)", ["bench/fake-upstream.ts", "--hold"], { PORT: "0" });
      children.push(hold.child);
      openStreams = await measureOpenStreams({ dir, upstreamHoldUrl: hold.url, requested: options.streams }).catch(
        (err: unknown) => ({ error: errorOf(err) }),
      );
      await hold.child.close();
    }
  } finally {
    for (const child of children.reverse()) await child.close(5_000);
    await redis?.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const errors = load_.reduce((n, r) => n + r.figures.errors + r.figures.non2xx + r.figures.badBodies, 0);
  if (errors > 0)
    notes.push(
      `${errors} errors, incomplete answers or non-2xx answers in the load windows ` +
        "(see the table; status codes in the JSON).",
    );
  const cpu = cpus();
  return {
    date: started.toISOString().slice(0, 10),
    startedAt: started.toISOString(),
    durationSeconds: (performance.now() - t0) / 1000,
    command: options.command,
    machine: {
      cpus: cpu.length,
      cpuModel: cpu[0]?.model.trim() ?? "unknown",
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      ...gitState(),
    },
    options: {
      seconds: options.seconds,
      warmupSeconds: options.warmupSeconds,
      processWarmupSeconds: options.processWarmupSeconds,
      connections: options.connections,
      quick: options.quick,
      streams: options.streams,
    },
    load: load_,
    floorRuns,
    scenarios,
    openStreams,
    extractive,
    refusal,
    targets: checkTargets(load_, openStreams),
    notes,
  };
}

/** The floor row per mode and concurrency: the mean of its runs (rates, quantiles), summed counts. */
function meanOfRuns(runs: LoadRow[][]): LoadRow[] {
  const first = runs[0] ?? [];
  return first.map((row, i) => {
    const all = runs.map((run) => run[i]).filter((r): r is LoadRow => r !== undefined);
    const mean = (f: (r: LoadRow) => number) => all.reduce((s, r) => s + f(r), 0) / all.length;
    const sum = (f: (r: LoadRow) => number) => all.reduce((s, r) => s + f(r), 0);
    return {
      target: FLOOR,
      mode: row.mode,
      connections: row.connections,
      figures: {
        connections: row.connections,
        seconds: sum((r) => r.figures.seconds),
        completed: sum((r) => r.figures.completed),
        rps: mean((r) => r.figures.rps),
        p50: mean((r) => r.figures.p50),
        p99: mean((r) => r.figures.p99),
        errors: sum((r) => r.figures.errors),
        timeouts: sum((r) => r.figures.timeouts),
        non2xx: sum((r) => r.figures.non2xx),
        badBodies: sum((r) => r.figures.badBodies),
        statusCodes: row.figures.statusCodes,
      },
    };
  });
}

function floorSpread(runs: LoadRow[][]): string {
  const first = runs[0] ?? [];
  if (runs.length < 2) return "The floor was measured once.";
  const parts = first.map((r, i) => {
    const rates = runs.map((run) => run[i]?.figures.rps ?? Number.NaN).map((x) => x.toFixed(0));
    return `${r.mode} c=${r.connections}: ${rates.join(", ")} req/s`;
  });
  return (
    `The floor was measured ${runs.length} times (before the Sluice scenarios and after each); ` +
    `the table shows the mean. Runs: ${parts.join("; ")}.`
  );
}

/** The extractive model's greedy call on the 32K-token input, end to end through Sluice. */
async function throughSluice(
  sluice: SluiceProc,
  conversationFile: string,
  runs: number,
): Promise<{ medianMs: number | null; status: string }> {
  const messages: unknown = JSON.parse(readFileSync(conversationFile, "utf8"));
  const body = JSON.stringify({ model: "service-extract", max_tokens: 4096, messages });
  const times: number[] = [];
  const statuses = new Map<number, number>();
  for (let i = 0; i < runs + 1; i++) {
    const t = performance.now();
    const res = await fetch(`${sluice.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: sluice.authorization, "content-type": "application/json" },
      body,
    });
    await res.arrayBuffer();
    if (i > 0) times.push(performance.now() - t); // the first call is a warm-up
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  }
  times.sort((a, b) => a - b);
  const status = [...statuses].map(([code, n]) => `${code} ×${n}`).join(", ");
  return {
    medianMs: statuses.size === 1 && statuses.has(200) ? (times[Math.floor((times.length - 1) / 2)] ?? null) : null,
    status,
  };
}
