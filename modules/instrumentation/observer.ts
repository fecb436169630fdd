/**
 * Everything that watches the agent — files, processes, output, rollouts — is an observer: it is
 * started before the agent, emits facts to the run's recorder while the agent works, and is flushed
 * (everything seen so far is recorded) and stopped (the final state is recorded) when the run closes.
 */
export interface Observer {
  start(): Promise<void>;
  /** Records everything observed so far; resolves once it is durable. */
  flush(): Promise<void>;
  /** Final flush; no facts afterwards. Rejects with the first storage or recording error, if any. */
  stop(): Promise<void>;
}

/** The observer's clock: observation times are read once, when the fact is seen. */
export type ObservationClock = () => Date;

export const systemClock: ObservationClock = () => new Date();
