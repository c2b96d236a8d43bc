/**
 * A minimal Prometheus registry: labelled counters and duration sums, rendered in the text
 * exposition format. Enough to alert on error rates and latency without a dependency.
 */
export interface Metrics {
  /** Counts one finished HTTP exchange of the edge. */
  http(route: string, method: string, status: number, seconds: number): void;
  /** Counts one finished RPC of the core. */
  rpc(rpc: string, code: string, seconds: number): void;
  /** Counts one command sent to Redis (one round trip; a Lua script is one). */
  redisCommand(): void;
  render(): string;
}

type Labels = Record<string, string>;

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const key = (labels: Labels) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",");

function family(name: string, help: string) {
  const count = new Map<string, number>();
  const sum = new Map<string, number>();
  // The rendered label set of each raw one, made once: every RPC and HTTP exchange observes
  // one, and escaping and joining it each time showed in profiles of the chat path. It holds
  // as many entries as `count`.
  const keys = new Map<string, string>();
  return {
    observe(labels: Labels, seconds: number) {
      const raw = Object.values(labels).join("\u0000");
      let k = keys.get(raw);
      if (k === undefined) {
        k = key(labels);
        keys.set(raw, k);
      }
      count.set(k, (count.get(k) ?? 0) + 1);
      sum.set(k, (sum.get(k) ?? 0) + seconds);
    },
    render(): string {
      const lines = [`# HELP ${name}_total ${help}`, `# TYPE ${name}_total counter`];
      for (const [k, v] of count) lines.push(`${name}_total{${k}} ${v}`);
      lines.push(`# HELP ${name}_seconds_sum Total time spent, in seconds.`, `# TYPE ${name}_seconds_sum counter`);
      for (const [k, v] of sum) lines.push(`${name}_seconds_sum{${k}} ${v.toFixed(6)}`);
      return lines.join("\n");
    },
  };
}

/** Builds an empty registry; one per process, passed to the edge and the core. */
export function createMetrics(): Metrics {
  const http = family("sluice_http_requests", "HTTP requests served by the edge.");
  const rpc = family("sluice_rpcs", "RPCs served by the core.");
  let redisCommands = 0;
  return {
    redisCommand: () => {
      redisCommands += 1;
    },
    http: (route, method, status, seconds) => http.observe({ route, method, status: String(status) }, seconds),
    rpc: (name, code, seconds) => rpc.observe({ rpc: name, code }, seconds),
    render: () =>
      [
        http.render(),
        rpc.render(),
        "# HELP sluice_redis_commands_total Commands sent to Redis (a Lua script counts once).",
        "# TYPE sluice_redis_commands_total counter",
        `sluice_redis_commands_total ${redisCommands}`,
        "",
      ].join("\n"),
  };
}
