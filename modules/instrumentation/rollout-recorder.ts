import { createHash } from 'node:crypto';
import PQueue from 'p-queue';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { Recorder } from '../ledger/recorder.js';
import type { EnvResetResult, EnvStepResult } from '../../tasks/task-pack.js';
import { systemClock, type ObservationClock } from './observer.js';

/** Finished episodes are recorded in batches of this many (and whatever is left at flush()). */
export const ROLLOUT_BATCH_SIZE = 10;

interface StepLine {
  action: string;
  observation: string;
  reward: number;
  done: boolean;
  info: Record<string, unknown>;
}

interface Episode {
  sessionId: string;
  seed: number;
  observation: string;
  steps: StepLine[];
  done: boolean;
  /** True when this record continues an episode whose start was already flushed. */
  continued: boolean;
}

/**
 * Records every step of every environment session of one run. An episode is kept in memory until
 * it ends, then batched: one RolloutBatchRecorded per ROLLOUT_BATCH_SIZE finished episodes, with the
 * trajectories as an NDJSON blob in the artifact store. flush() (at run end) records the rest,
 * unfinished episodes included.
 *
 * An episode counts as a success when its last step says so (`info.success` or `info.won`), or,
 * for environments that report neither, when it ended with a positive final reward (sparse reward).
 */
export class RolloutRecorder {
  private readonly open = new Map<string, Episode>();
  private finished: Episode[] = [];
  /** Batches are written one after another so their events keep the order the episodes ended in. */
  private readonly writes = new PQueue({ concurrency: 1 });

  constructor(
    private readonly env: string,
    private readonly sink: { record: Recorder; artifacts: ArtifactStore; clock?: ObservationClock },
    private readonly batchSize = ROLLOUT_BATCH_SIZE,
  ) {}

  begin(sessionId: string, seed: number, reset: EnvResetResult): void {
    this.open.set(sessionId, { sessionId, seed, observation: reset.observation, steps: [], done: false, continued: false });
  }

  /** Resolves once any batch this step completed is durable. */
  step(sessionId: string, seed: number, action: string, result: EnvStepResult): Promise<void> {
    let episode = this.open.get(sessionId);
    if (!episode) {
      episode = { sessionId, seed, observation: '', steps: [], done: false, continued: true };
      this.open.set(sessionId, episode);
    }
    episode.steps.push({ action, observation: result.observation, reward: result.reward, done: result.done, info: result.info });
    if (!result.done) return Promise.resolve();
    episode.done = true;
    this.open.delete(sessionId);
    this.finished.push(episode);
    if (this.finished.length < this.batchSize) return Promise.resolve();
    const batch = this.finished;
    this.finished = [];
    return this.enqueue(batch);
  }

  /** Records every episode not yet recorded, finished or not. */
  flush(): Promise<void> {
    const batch = [...this.finished, ...this.open.values()];
    this.finished = [];
    this.open.clear();
    return batch.length > 0 ? this.enqueue(batch) : this.writes.onIdle();
  }

  /** The batch was observed complete now; it is written after the batches before it. */
  private enqueue(batch: Episode[]): Promise<void> {
    const observedAt = (this.sink.clock ?? systemClock)().toISOString();
    return this.writes.add(() => this.write(batch, observedAt));
  }

  private async write(batch: Episode[], observedAt: string): Promise<void> {
    const lines = batch.map((e) => {
      const ret = episodeReturn(e);
      return JSON.stringify({
        session_id: e.sessionId,
        seed: e.seed,
        done: e.done,
        success: succeeded(e),
        return: ret,
        ...(e.continued ? { continued: true } : { observation: e.observation }),
        steps: e.steps,
      });
    });
    const body = Buffer.from(`${lines.join('\n')}\n`, 'utf8');
    const sha256 = createHash('sha256').update(body).digest('hex');
    const stored = await this.sink.artifacts.put(body, { sha256, size: body.length });
    const returns = batch.map(episodeReturn);
    await this.sink.record('RolloutBatchRecorded', {
      env: this.env,
      episodes: batch.length,
      steps: batch.reduce((n, e) => n + e.steps.length, 0),
      successRate: batch.filter(succeeded).length / batch.length,
      meanReturn: returns.reduce((a, b) => a + b, 0) / batch.length,
      trajectories: { sha256: stored.sha256, size: stored.size, key: stored.key },
      observedAt,
    });
  }
}

function episodeReturn(e: Episode): number {
  return e.steps.reduce((sum, s) => sum + s.reward, 0);
}

function succeeded(e: Episode): boolean {
  const last = e.steps.at(-1);
  if (!e.done || !last) return false;
  if (typeof last.info.success === 'boolean') return last.info.success;
  if (typeof last.info.won === 'boolean') return last.info.won;
  return last.reward > 0;
}
