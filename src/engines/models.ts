import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type { Engine } from "./engine.ts";

/** The built-in default model. */
export const DEFAULT_MODEL = "service-extract";

const price = z.number().int().nonnegative().optional();

const extractiveEntry = z
  .object({
    name: z.string().min(1),
    engine: z.literal("extractive"),
    inputUsdMicrosPerMillion: price,
    outputUsdMicrosPerMillion: price,
    free: z.boolean().default(false),
    tokenizer: z.literal("o200k_base").default("o200k_base"),
  })
  .strict();

const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//.test(u), "must be an http:// or https:// URL");
const ms = (fallback: number) => z.number().int().positive().default(fallback);

const openaiEntry = z
  .object({
    name: z.string().min(1),
    engine: z.literal("openai"),
    baseUrl: z.union([httpUrl, z.array(httpUrl).min(1)]),
    upstreamModel: z.string().min(1).optional(),
    apiKeyEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")
      .optional(),
    connectTimeoutMs: ms(5_000),
    firstByteTimeoutMs: ms(60_000),
    idleTimeoutMs: ms(30_000),
    breakerFailures: z.number().int().positive().default(5),
    breakerOpenMs: ms(10_000),
    inputUsdMicrosPerMillion: price,
    outputUsdMicrosPerMillion: price,
    free: z.boolean().default(false),
    tokenizer: z.literal("o200k_base").default("o200k_base"),
  })
  .strict();

const entrySchema = z.discriminatedUnion("engine", [extractiveEntry, openaiEntry]);

/**
 * The models file of DESIGN.md. A priced model needs both prices above zero; a model with
 * no price must say `"free": true`, so a typo can never make calls free by accident.
 */
export const modelsFileSchema = z
  .object({ models: z.array(entrySchema).min(1) })
  .strict()
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    file.models.forEach((m, i) => {
      if (seen.has(m.name))
        ctx.addIssue({ code: "custom", path: ["models", i, "name"], message: `duplicate model name "${m.name}"` });
      seen.add(m.name);
      const priced = (m.inputUsdMicrosPerMillion ?? 0) > 0 && (m.outputUsdMicrosPerMillion ?? 0) > 0;
      if (!priced && !m.free) {
        ctx.addIssue({
          code: "custom",
          path: ["models", i],
          message: `model "${m.name}" has no price (or a zero price); set both prices or "free": true`,
        });
      }
    });
  });

export type ModelEntry = z.infer<typeof entrySchema>;

/** A servable model: its engine and its prices in micros per million tokens. */
export interface Model {
  name: string;
  engine: Engine;
  inputUsdMicrosPerMillion: number;
  outputUsdMicrosPerMillion: number;
}

/** Name-to-model lookup; the core refuses unknown names with 404 `model_not_found`. */
export interface ModelRegistry {
  get(name: string): Model | undefined;
  list(): Model[];
}

/** The built-in entry used when no models file is given. */
export const BUILTIN_MODELS: ModelEntry[] = [
  {
    name: DEFAULT_MODEL,
    engine: "extractive",
    inputUsdMicrosPerMillion: 1_000_000,
    outputUsdMicrosPerMillion: 2_000_000,
    free: false,
    tokenizer: "o200k_base",
  },
];

/** Thrown with a message that names the file and the bad entry. */
export class ModelsFileError extends Error {
  override name = "ModelsFileError";
}

/** Reads and validates a JSON or YAML models file. */
export async function loadModelsFile(path: string): Promise<ModelEntry[]> {
  let raw: unknown;
  try {
    const text = await readFile(path, "utf8");
    raw = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new ModelsFileError(
      `SLUICE_MODELS: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const parsed = modelsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join(".") || "(file)"}: ${issue.message}`);
    throw new ModelsFileError(`SLUICE_MODELS: ${path} is invalid:\n${lines.join("\n")}`);
  }
  return parsed.data.models;
}

/** Builds the registry, asking `engineFor` for each entry's engine. */
export function createModelRegistry(entries: ModelEntry[], engineFor: (entry: ModelEntry) => Engine): ModelRegistry {
  const models = new Map<string, Model>();
  for (const entry of entries) {
    models.set(entry.name, {
      name: entry.name,
      engine: engineFor(entry),
      inputUsdMicrosPerMillion: entry.inputUsdMicrosPerMillion ?? 0,
      outputUsdMicrosPerMillion: entry.outputUsdMicrosPerMillion ?? 0,
    });
  }
  return { get: (name) => models.get(name), list: () => [...models.values()] };
}
