import type { RequestListener } from "node:http";
import { AggregatorRegistry } from "prom-client";
import type { Metrics } from "./metrics.ts";

/**
 * The `/metrics` endpoint: the exposition text that `render` makes, fresh at each scrape.
 * Anything else is a 404, and a failed render a 500 with no detail.
 */
export function metricsHandler(contentType: string, render: () => Promise<string>): RequestListener {
  return (req, res) => {
    if (req.url !== "/metrics") return res.writeHead(404).end();
    render().then(
      (text) => res.writeHead(200, { "content-type": contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  };
}

/**
 * Makes this worker answer the primary's metrics requests (over the cluster's IPC channel)
 * with `metrics`. Workers share the listening ports, so a scrape of a worker's own registry
 * would see one worker chosen at random; the primary asks them all and serves the sum.
 */
export function reportMetricsToPrimary(metrics: Metrics): void {
  // Constructing an aggregator is what installs prom-client's worker-side listener.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([metrics.registry]);
}

/** The primary's `/metrics`: every worker's metrics, counters and histograms summed. */
export function clusterMetricsHandler(): RequestListener {
  const aggregator = new AggregatorRegistry();
  return metricsHandler(aggregator.contentType, () => aggregator.clusterMetrics());
}
