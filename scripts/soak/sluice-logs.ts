import { Tally } from "./outcomes.ts";

/**
 * Counts the warn and error lines the Sluice processes log (JSON lines on stderr) by level
 * and message, keeping one sample of each. A 500 or an internal-error event in the figures
 * is a finding; these lines say where it came from without keeping megabytes of logs.
 */
export class SluiceLogs {
  readonly byMessage = new Tally();
  readonly samples = new Map<string, string>();

  /**
   * A feeder for one process's raw stderr: whole lines are counted, a trailing partial line
   * waits for its end (one feeder per process, so lines of two processes never mix).
   */
  feeder(): (text: string) => void {
    let partial = "";
    return (text) => {
      const lines = (partial + text).split("\n");
      partial = lines.pop() ?? "";
      if (partial.length > 65_536) partial = "";
      for (const line of lines) this.line(line);
    };
  }

  private line(line: string): void {
    if (line.trim() === "") return;
    let key: string;
    try {
      const json = JSON.parse(line) as { level?: unknown; msg?: unknown };
      key = `${String(json.level)}: ${String(json.msg)}`;
    } catch {
      key = `(not JSON) ${line.slice(0, 80)}`;
    }
    this.byMessage.add(key);
    if (!this.samples.has(key)) this.samples.set(key, line.slice(0, 400));
  }
}
