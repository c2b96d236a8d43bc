import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadModelsFile, ModelsFileError } from "./models.ts";

async function file(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "sluice-models-"));
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

describe("loadModelsFile", () => {
  it("reads DESIGN's JSON example", async () => {
    const path = await file(
      "models.json",
      JSON.stringify({
        models: [
          {
            name: "service-extract",
            engine: "extractive",
            inputUsdMicrosPerMillion: 1000000,
            outputUsdMicrosPerMillion: 2000000,
            tokenizer: "o200k_base",
          },
          {
            name: "llama-3.1-8b",
            engine: "openai",
            baseUrl: "http://vllm:8000/v1",
            upstreamModel: "meta-llama/Llama-3.1-8B-Instruct",
            apiKeyEnv: "VLLM_API_KEY",
            inputUsdMicrosPerMillion: 200000,
            outputUsdMicrosPerMillion: 600000,
          },
        ],
      }),
    );
    const models = await loadModelsFile(path);
    expect(models.map((m) => m.name)).toEqual(["service-extract", "llama-3.1-8b"]);
  });

  it("reads YAML", async () => {
    const path = await file("models.yaml", "models:\n  - name: tiny\n    engine: extractive\n    free: true\n");
    expect((await loadModelsFile(path))[0]).toMatchObject({ name: "tiny", free: true });
  });

  it.each([
    ["no price", { name: "cheap", engine: "extractive" }, /models\.0: model "cheap" has no price/],
    [
      "a zero price",
      { name: "zero", engine: "extractive", inputUsdMicrosPerMillion: 0, outputUsdMicrosPerMillion: 5 },
      /model "zero" has no price/,
    ],
    ["an unknown engine", { name: "x", engine: "magic", free: true }, /models\.0\.engine/],
    ["an unknown field", { name: "x", engine: "extractive", free: true, colour: "red" }, /colour/],
  ])("refuses a model with %s, naming the entry", async (_what, entry, message) => {
    const path = await file("models.json", JSON.stringify({ models: [entry] }));
    await expect(loadModelsFile(path)).rejects.toThrow(ModelsFileError);
    await expect(loadModelsFile(path)).rejects.toThrow(message);
  });

  it("refuses duplicate names and unreadable files", async () => {
    const dup = await file(
      "m.json",
      JSON.stringify({
        models: [
          { name: "a", engine: "extractive", free: true },
          { name: "a", engine: "extractive", free: true },
        ],
      }),
    );
    await expect(loadModelsFile(dup)).rejects.toThrow(/duplicate model name "a"/);
    await expect(loadModelsFile(join(tmpdir(), "does-not-exist.json"))).rejects.toThrow(/cannot read/);
    await expect(loadModelsFile(await file("bad.json", "{nope"))).rejects.toThrow(/cannot read/);
  });
});
