import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { EnvSession } from '../../tasks/task-pack.js';
import type { RunContext } from '../runs/run-context.js';
import { RolloutRecorder } from './rollout-recorder.js';

export interface RegisterOptions {
  /** Submissions arriving later are refused (budget_exhausted). */
  deadline: Date;
  /** Called after every graded submission (the harness keeps run_meta.json's last_submit_time current). */
  onSubmitted?(): void;
  baselineScore: number;
}

export interface GradeRecord {
  submissionId: string;
  score: number;
  details: Record<string, unknown>;
}

/** One open environment session of an interactive task. */
export interface OpenSession {
  session: EnvSession;
  seed: number;
}

/** A run the grading API currently serves, with the state its endpoints share. */
export class ActiveRun {
  baselineScore: number;
  best: number | null = null;
  /** Successful grades by manifest sha256: identical content resubmitted gets the earlier grade. */
  readonly gradesByContent = new Map<string, GradeRecord>();
  readonly sessions = new Map<string, OpenSession>();
  readonly rollouts: RolloutRecorder | null;
  private submissions = 0;
  private sessionCount = 0;
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    readonly ctx: RunContext,
    readonly deadline: Date,
    readonly onSubmitted: (() => void) | undefined,
    baselineScore: number,
  ) {
    this.baselineScore = baselineScore;
    const env = ctx.task.environment;
    this.rollouts = env ? new RolloutRecorder(env.name, { record: ctx.record, artifacts: ctx.artifacts }) : null;
  }

  get startedAt(): Date {
    return new Date(this.deadline.getTime() - this.ctx.budgetSeconds * 1000);
  }

  get totalSubmissions(): number {
    return this.submissions;
  }

  /** `sub-<n>`, allocated to every submission that passed authentication and body validation. */
  nextSubmissionId(): string {
    return `sub-${++this.submissions}`;
  }

  nextSessionId(): { id: string; ordinal: number } {
    const ordinal = ++this.sessionCount;
    return { id: `sess-${ordinal}`, ordinal };
  }

  /** True for ids this run handed out whose session has since finished. */
  sessionFinished(id: string): boolean {
    const match = /^sess-(\d{1,9})$/.exec(id);
    return match !== null && Number(match[1]) <= this.sessionCount && !this.sessions.has(id);
  }

  /** Keeps `work` visible to unregister(), which waits for it so no submission's events are lost. */
  track<R>(work: Promise<R>): Promise<R> {
    this.inFlight.add(work);
    void work.catch(() => undefined).finally(() => this.inFlight.delete(work));
    return work;
  }

  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}

/** Digests give equal-length buffers, so timingSafeEqual applies whatever the presented token's length. */
function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

export function tokensEqual(presented: string, expected: string): boolean {
  return timingSafeEqual(digest(presented), digest(expected));
}

/** The runs the grading API serves; a request's run is found by its capability token only. */
@Injectable()
export class RunRegistry {
  private readonly runs = new Map<string, { run: ActiveRun; tokenDigest: Buffer }>();

  register(ctx: RunContext, opts: RegisterOptions): ActiveRun {
    if (this.runs.has(ctx.runId)) throw new Error(`run ${ctx.runId} is already registered with the grading API`);
    if (ctx.token.length < 16) throw new Error(`run ${ctx.runId}: the run token is too short to be a credential`);
    const run = new ActiveRun(ctx, opts.deadline, opts.onSubmitted, opts.baselineScore);
    this.runs.set(ctx.runId, { run, tokenDigest: digest(ctx.token) });
    return run;
  }

  /**
   * Stops serving the run (its token is refused from now on), waits for submissions still being
   * graded, then records the rollouts not yet batched, finished or not.
   */
  async unregister(runId: string): Promise<void> {
    const entry = this.runs.get(runId);
    if (!entry) return;
    this.runs.delete(runId);
    await entry.run.drain();
    await entry.run.rollouts?.flush();
  }

  byToken(token: string): ActiveRun | null {
    const presented = digest(token);
    let found: ActiveRun | null = null;
    // Every entry is compared so the time taken does not depend on which run (if any) matched.
    for (const { run, tokenDigest } of this.runs.values()) {
      if (timingSafeEqual(presented, tokenDigest)) found = run;
    }
    return found;
  }

  byRunId(runId: string): ActiveRun | null {
    return this.runs.get(runId)?.run ?? null;
  }
}
