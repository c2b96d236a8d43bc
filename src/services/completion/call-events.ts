import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { FinishReason } from "../../../gen/sluice/completion/v1/completion_service_pb.ts";
import type { EngineEvent } from "../../engines/engine.ts";
import { canceled } from "./call-failures.ts";
import type { Handoff } from "./handoff.ts";

/**
 * What a chat call hands its one reader, and how a settled call's last events reach it: kept
 * apart from the call's life (call.ts) so that module stays about admission, holds and outcomes.
 */

/** What a call yields, in order: deltas, then the finish, then the billed usage. */
export type CallEvent =
  | { type: "delta"; choice: number; text: string; toolCalls?: JsonValue[]; last?: boolean; tokens: number }
  | { type: "finish"; choice: number; finishReason: FinishReason; logprobs?: JsonObject }
  | { type: "usage"; promptTokens: number; completionTokens: number; costUsdMicros: number };

/** Hands the finishes and the billed usage of a settled call to its reader, then ends it. */
export async function deliverEnd(
  handoff: Handoff<CallEvent>,
  done: Extract<EngineEvent, { type: "done" }>,
  usage: Extract<CallEvent, { type: "usage" }>,
): Promise<void> {
  try {
    const finishes = done.choices ?? [
      { finishReason: done.finishReason, ...(done.logprobs && { logprobs: done.logprobs }) },
    ];
    for (const [choice, f] of finishes.entries()) {
      await handoff.push({
        type: "finish",
        choice,
        finishReason: f.finishReason,
        ...(f.logprobs && { logprobs: f.logprobs }),
      });
    }
    await handoff.push(usage);
    handoff.close();
  } catch {
    // The reader left after the call was complete and charged: nothing is left to tell it.
    handoff.fail(canceled("The caller went away after the call was complete; it was billed."));
  }
}
