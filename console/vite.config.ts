/**
 * Builds the Sluice console: a static Preact app the server serves at `/console/` on the public port.
 *
 * The output in `console/dist` is committed, so the build must be deterministic: `npm run console:check`
 * rebuilds it into a temporary directory and fails when the two differ.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const root = fileURLToPath(new URL(".", import.meta.url));
const sluice = process.env.SLUICE_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  root,
  base: "/console/",
  // Vite 8 transforms TSX with Oxc; the automatic runtime from Preact means no JSX plugin is needed.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    // One chunk and no preload polyfill: the page is small enough to load at once.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  // `npm run console:dev` serves the sources with the RPCs and /readyz of a running Sluice (SLUICE_URL, else
  // the `npm start` default), so the page talks to a real server same-origin, as it does in production.
  server: {
    fs: { allow: [fileURLToPath(new URL("..", import.meta.url))] },
    proxy: { "^/sluice\\.": sluice, "/readyz": sluice },
  },
});
