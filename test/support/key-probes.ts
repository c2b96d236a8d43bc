/**
 * Calls that keep presenting a key's old and new secrets while a test rotates it, so a suite
 * can show that at every instant at least one of them works, and when each stops. Each loop
 * sends `GET /v1/me` with the old secret and, once the test has it, the new one at the same
 * moment, round after round, to one edge after another.
 */

/** One answer: "200", or the status and error code ("401 invalid_api_key"). */
export type Outcome = string;

/**
 * One round of one loop: both secrets presented together, with the test's phase when it began
 * and when it ended. Only a round that began and ended in one phase tells what that phase does;
 * one that straddles a change (a rotation, the clock moved) may have been served on either side.
 */
export interface Round {
  phase: string;
  endPhase: string;
  edge: string;
  /** `Date.now()` when the round's calls were sent and when both had answered. */
  startedMs: number;
  endedMs: number;
  old: Outcome;
  /** Unset before the test handed the new secret over. */
  new?: Outcome;
}

export interface SecretProber {
  /** Labels the rounds that start from now on; `newSecret` joins them once given. */
  phase(name: string, newSecret?: string): void;
  /** Resolves once `count` rounds have begun and ended in the current phase, on every edge. */
  rounds(count: number): Promise<void>;
  /** Stops the loops after their current round; resolves to every round, in the order they ended. */
  stop(): Promise<Round[]>;
}

/** The rounds that began and ended in `phase`. */
export function within(rounds: Round[], phase: string): Round[] {
  return rounds.filter((r) => r.phase === phase && r.endPhase === phase);
}

/** One call; a failure to answer at all is an outcome too ("failed ..."), so a loop never dies. */
async function present(edge: string, secret: string): Promise<Outcome> {
  try {
    const res = await fetch(`${edge}/v1/me`, { headers: { authorization: `Bearer ${secret}` } });
    const text = await res.text();
    if (res.status === 200) return "200";
    const body = JSON.parse(text) as { detail?: string; error?: { code?: string } };
    return `${res.status} ${body.detail ?? body.error?.code ?? text}`;
  } catch (err) {
    return `failed ${String(err)}`;
  }
}

/** Starts `loopsPerEdge` loops per edge, presenting `oldSecret` (and the new one once given). */
export function probeSecrets(options: { edges: string[]; oldSecret: string; loopsPerEdge?: number }): SecretProber {
  const { edges, oldSecret, loopsPerEdge = 2 } = options;
  const state: { phase: string; newSecret: string | undefined; stopped: boolean } = {
    phase: "before",
    newSecret: undefined,
    stopped: false,
  };
  const done: Round[] = [];
  let waiters: Array<() => void> = [];

  const loop = async (edge: string) => {
    while (!state.stopped) {
      const { phase, newSecret } = state;
      const startedMs = Date.now();
      const [old, fresh] = await Promise.all([
        present(edge, oldSecret),
        newSecret === undefined ? undefined : present(edge, newSecret),
      ]);
      const endedMs = Date.now();
      done.push({
        phase,
        endPhase: state.phase,
        edge,
        startedMs,
        endedMs,
        old,
        ...(fresh !== undefined && { new: fresh }),
      });
      for (const wake of waiters) wake();
      waiters = [];
    }
  };
  const running = edges.flatMap((edge) => Array.from({ length: loopsPerEdge }, () => loop(edge)));
  const counted = (count: number) =>
    edges.every((edge) => within(done, state.phase).filter((r) => r.edge === edge).length >= count);

  return {
    phase(name, newSecret) {
      state.phase = name;
      if (newSecret !== undefined) state.newSecret = newSecret;
    },
    async rounds(count) {
      while (!counted(count)) await new Promise<void>((wake) => waiters.push(wake));
    },
    async stop() {
      state.stopped = true;
      await Promise.all(running);
      return done;
    },
  };
}
