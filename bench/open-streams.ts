/**
 * Sluice's resident memory with many SSE streams open at once (issue 8: 10,000 streams in
 * at most 512 MiB). A fresh Sluice on the memory store serves a model whose upstream holds
 * every stream open after its first word; a separate holder process opens the streams; the
 * figure is Sluice's VmRSS once they are all open, next to its idle RSS.
 *
 * Each open stream costs Sluice two sockets (the caller's and the upstream's), so the count
 * is capped by Sluice's open-file limit; the cap and its reason are reported, never hidden.
 * The upstream is listed under many `baseUrl`s (one connection pool of 128 each, as with many
 * model servers) so no stream waits in a pool queue instead of being open.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fdCount, openFileLimit, progress, startChild, statusKiB, type Child } from "./procs.ts";
import { startSluice, type SluiceProc } from "./sluice-proc.ts";

/** Result of the open-streams measurement. Memory in MiB. */
export interface OpenStreamsResult {
  requested: number;
  /** Streams attempted after the file-limit cap. */
  attempted: number;
  open: number;
  failed: number;
  /** Streams that closed again before the reading was taken. */
  closedBeforeReading: number;
  firstError: string | null;
  /** Why fewer than `requested` were attempted, if they were. */
  capReason: string | null;
  idleRssMiB: number;
  openRssMiB: number;
  peakRssMiB: number;
  kibPerStream: number;
  /** openRss + (requested - open) * per-stream cost, when fewer than requested were open. */
  projectedRssMiB: number;
  sluiceFds: number;
  openSeconds: number;
}

const MIB = 1024;
/** Connections per upstream pool in Sluice's `openai` engine. */
const POOL_CONNECTIONS = 128;

/** Opens the streams, reads the memory, and closes everything it started. */
export async function measureOpenStreams(opts: {
  dir: string;
  upstreamHoldUrl: string;
  requested: number;
}): Promise<OpenStreamsResult> {
  const pools = Math.ceil(opts.requested / POOL_CONNECTIONS) + 2;
  const modelsFile = join(opts.dir, "models-hold.json");
  writeFileSync(
    modelsFile,
    JSON.stringify({
      models: [
        {
          name: "bench-hold",
          engine: "openai",
          baseUrl: Array.from({ length: pools }, (_, i) => `${opts.upstreamHoldUrl.replace(/\/v1$/, "")}/pool${i}/v1`),
          upstreamModel: "bench-hold",
          idleTimeoutMs: 600_000,
          inputUsdMicrosPerMillion: 200_000,
          outputUsdMicrosPerMillion: 600_000,
        },
      ],
    }),
  );
  let sluice: SluiceProc | undefined;
  let holder: Child | undefined;
  try {
    sluice = await startSluice({
      label: "open-streams",
      modelsFile,
      dir: opts.dir,
      env: { SLUICE_SSE_WRITE_TIMEOUT_MS: "600000" },
    });
    await sleep(1_000);
    const idleKiB = statusKiB(sluice.pid, "VmRSS");
    const limit = openFileLimit(sluice.pid).soft;
    const baseFds = fdCount(sluice.pid);
    // Two sockets per stream, and some room for the store, the logs and the admin client.
    const fit = Math.floor((limit - baseFds - 64) / 2);
    const attempted = Math.min(opts.requested, fit);
    const capReason =
      attempted < opts.requested
        ? `Sluice's open-file limit is ${limit} (hard limit; this container cannot raise it) and each stream holds ` +
          `2 sockets (caller + upstream), so at most ${fit} fit`
        : null;
    progress(
      `open streams: idle RSS ${(idleKiB / MIB).toFixed(1)} MiB, ` +
        `opening ${attempted} streams${capReason ? ` (capped: ${capReason})` : ""}`,
    );

    const body = JSON.stringify({
      model: "bench-hold",
      stream: true,
      max_tokens: 64,
      messages: [{ role: "user", content: "Hold this stream open, please." }],
    });
    holder = startChild("stream holder", ["bench/stream-holder.ts"], {
      ...process.env,
      TARGET_URL: `${sluice.edgeUrl}/v1/chat/completions`,
      AUTH: sluice.authorization,
      BODY: body,
      COUNT: String(attempted),
      OPENING: "200",
    });
    const started = performance.now();
    let seen = 0;
    const h = holder;
    const doneLine = h.line((l) => l.includes('"done"'), 300_000);
    for (let i = 0; i < 3_000 && !h.lines().some((l) => l.includes('"done"')); i++) {
      const lines = h.lines();
      for (; seen < lines.length; seen++) progress(`open streams: ${lines[seen] ?? ""}`);
      await Promise.race([
        doneLine.then(
          () => undefined,
          () => undefined,
        ),
        sleep(1_000),
      ]);
    }
    const done = JSON.parse(await doneLine) as {
      open: number;
      failed: number;
      firstError: string | null;
      seconds: number;
    };
    progress(
      `open streams: ${done.open} open, ${done.failed} failed in ${done.seconds.toFixed(1)} s; letting Sluice settle`,
    );
    await sleep(3_000);
    const openKiB = statusKiB(sluice.pid, "VmRSS");
    const peakKiB = statusKiB(sluice.pid, "VmHWM");
    const sluiceFds = fdCount(sluice.pid);
    const closed = Math.max(
      0,
      ...h.lines().map((l) => Number((JSON.parse(l) as { closedLater?: number }).closedLater ?? 0)),
    );
    const stillOpen = done.open - closed;
    const kibPerStream = stillOpen > 0 ? (openKiB - idleKiB) / stillOpen : Number.NaN;
    return {
      requested: opts.requested,
      attempted,
      open: stillOpen,
      failed: done.failed,
      closedBeforeReading: closed,
      firstError: done.firstError,
      capReason,
      idleRssMiB: idleKiB / MIB,
      openRssMiB: openKiB / MIB,
      peakRssMiB: peakKiB / MIB,
      kibPerStream,
      projectedRssMiB: (openKiB + Math.max(0, opts.requested - stillOpen) * kibPerStream) / MIB,
      sluiceFds,
      openSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    await holder?.close(5_000);
    await sluice?.close();
  }
}
