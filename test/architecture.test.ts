import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Guards the layering of DESIGN.md: the edge only translates (it never imports services,
 * stores or engines), services never import the edge, stores never import services, the
 * error catalogue is a leaf, and there are no import cycles.
 */
const SRC = join(import.meta.dirname, "..", "src");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [path] : [];
  });
}

const graph = new Map<string, string[]>();
for (const file of sources(SRC)) {
  const imports = [...readFileSync(file, "utf8").matchAll(/from "(\.[^"]+)"/g)].map((m) =>
    normalize(join(dirname(file), m[1] ?? "")),
  );
  graph.set(
    relative(SRC, file),
    imports.filter((p) => p.startsWith(SRC)).map((p) => relative(SRC, p)),
  );
}

const edges = [...graph].flatMap(([from, tos]) => tos.map((to) => ({ from, to })));
const under = (path: string, ...dirs: string[]) => dirs.some((d) => path.startsWith(`${d}/`));

describe("architecture", () => {
  it("reads the source tree", () => {
    expect(graph.size).toBeGreaterThan(20);
  });

  it("keeps the edge free of business layers", () => {
    expect(edges.filter((e) => under(e.from, "edge") && under(e.to, "services", "store", "engines"))).toEqual([]);
  });

  it("keeps services, stores and engines from depending on the edge", () => {
    expect(edges.filter((e) => under(e.from, "services", "store", "engines") && under(e.to, "edge"))).toEqual([]);
  });

  it("keeps stores below services and the catalogue a leaf", () => {
    expect(edges.filter((e) => under(e.from, "store") && under(e.to, "services", "engines"))).toEqual([]);
    expect(edges.filter((e) => under(e.from, "errors") && !under(e.to, "errors"))).toEqual([]);
  });

  it("has no import cycles", () => {
    const state = new Map<string, "open" | "done">();
    const cycles: string[][] = [];
    const visit = (node: string, stack: string[]) => {
      state.set(node, "open");
      for (const next of graph.get(node) ?? []) {
        if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
        else if (!state.has(next)) visit(next, [...stack, next]);
      }
      state.set(node, "done");
    };
    for (const node of graph.keys()) if (!state.has(node)) visit(node, [node]);
    expect(cycles).toEqual([]);
  });
});
