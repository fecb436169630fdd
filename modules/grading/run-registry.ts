import { createHash, timingSafeEqual } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import PQueue from 'p-queue';
import type { EnvironmentContext, EnvSession, InteractiveEnvironment, TrainingEnvironment } from '../../tasks/task-pack.js';
import type { RunContext } from '../run-context/run-context.js';
import type { RunMetaFields } from '../workspace-fs/layout.js';
import { RolloutRecorder } from '../instrumentation/rollout-recorder.js';

export interface RegisterOptions {
  /** Submissions arriving later are refused (budget_exhausted). */
  deadline: Date;
  /**
   * Called after every submission that reached the evaluator, graded or failed (as the paper's server
   * updates last_submit_time; the harness keeps run_meta.json current).
   */
  onSubmitted?(): void;
  /** Called once a submission is received, before it is graded (the harness checks data/ and models/). */
  beforeGrading?(submissionId: string): Promise<void>;
  baselineScore: number;
  /** A resumed run: the submissions numbered so far (`sub-<n>` continues after them) and the best graded score. */
  continueFrom?: { submissions: number; best: number | null };
  /** Starts environment servers for interactive tasks. */
  envContext?: EnvironmentContext;
  /** run_meta.json as the harness keeps it, for `GET /time`; without it the fields are derived from the run (ActiveRun.runMeta). */
  runMeta?(): Readonly<RunMetaFields>;
}

/**
 * One submission the evaluator answered, as the paper's scores.json holds it: `score` is 0 when the
 * grading failed (`error` says why, `reason` is the SubmissionRejected reason class).
 */
export interface SubmissionEntry {
  submission_id: string;
  /** When the answer was ready (ISO 8601, UTC). */
  timestamp: string;
  /** As the agent gave it. */
  model_path: string;
  score: number;
  baseline_score: number;
  /** null when the grading failed (a2rl's: no improvement was measured). */
  improvement: number | null;
  /** From the request's arrival, waiting for the device included. */
  elapsed_seconds: number;
  error?: string;
  reason?: 'invalid_checkpoint' | 'evaluator_error';
}

export interface GradeRecord {
  submissionId: string;
  score: number;
  details: Record<string, unknown>;
  /** The graded items' blob (EvaluationResult.items as NDJSON), when the evaluator reported them. */
  items?: { sha256: string; size: number; key: string };
}

/** One open environment session of an interactive task; its steps run one after another. */
export class OpenSession {
  private readonly steps = new PQueue({ concurrency: 1 });

  constructor(
    readonly session: EnvSession,
    readonly seed: number,
  ) {}

  serialize<R>(work: () => Promise<R>): Promise<R> {
    return this.steps.add(work);
  }
}

/** A run the grading API currently serves, with the state its endpoints share. */
export class ActiveRun {
  baselineScore: number;
  /** Highest score graded so far (a2rl's `best_score`); failed gradings never count. */
  best: number | null = null;
  /** Every answered submission, in the order answered (the paper's scores.json). */
  readonly answered: SubmissionEntry[] = [];
  /** Epoch seconds of the last answered submission. */
  lastSubmitTime: number | null = null;
  /** Successful grades by manifest sha256: identical content resubmitted gets the earlier grade. */
  readonly gradesByContent = new Map<string, GradeRecord>();
  readonly sessions = new Map<string, OpenSession>();
  readonly rollouts: RolloutRecorder | null;
  /** Sessions being created (counted against MAX_OPEN_SESSIONS). */
  pendingSessions = 0;
  private training: Promise<TrainingEnvironment> | null = null;
  private environmentClosed = false;
  private submissions = 0;
  private sessionCount = 0;
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    readonly ctx: RunContext,
    readonly deadline: Date,
    readonly onSubmitted: (() => void) | undefined,
    baselineScore: number,
    private readonly envContext?: EnvironmentContext,
    readonly beforeGrading?: (submissionId: string) => Promise<void>,
    private readonly readRunMeta?: () => Readonly<RunMetaFields>,
  ) {
    this.baselineScore = baselineScore;
    const env = ctx.task.environment;
    this.rollouts = env ? new RolloutRecorder(env.name, { record: ctx.record, artifacts: ctx.artifacts }) : null;
  }

  /** The run's training environment, opened on first use (a failed start is retried by the next call). */
  trainingEnvironment(env: InteractiveEnvironment): Promise<TrainingEnvironment> {
    if (this.environmentClosed) return Promise.reject(new Error(`run ${this.ctx.runId} has ended: its environment is closed`));
    if (!this.training) {
      const ctx: EnvironmentContext = this.envContext ?? {
        envServer: (name) => Promise.reject(new Error(`run ${this.ctx.runId} was registered without environment servers (asked for ${name})`)),
      };
      const opening = Promise.resolve().then(() => env.open(ctx));
      opening.catch(() => {
        if (this.training === opening) this.training = null;
      });
      this.training = opening;
    }
    return this.training;
  }

  get environmentIsClosed(): boolean {
    return this.environmentClosed;
  }

  /** Closes every open session and the training environment (stopping its server); never throws. */
  async closeEnvironment(): Promise<void> {
    this.environmentClosed = true;
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(sessions.map((s) => s.session.close?.()));
    const training = this.training;
    this.training = null;
    if (training) await training.then((t) => t.close?.()).catch(() => undefined);
  }

  get startedAt(): Date {
    return new Date(this.deadline.getTime() - this.ctx.budgetSeconds * 1000);
  }

  /** run_meta.json's fields: the harness's own where registered with them, else derived from the run. */
  runMeta(): RunMetaFields {
    if (this.readRunMeta) return { ...this.readRunMeta() };
    return { start_time: this.startedAt.getTime() / 1000, timeout_s: this.ctx.budgetSeconds, last_submit_time: this.lastSubmitTime, end_time: null };
  }

  /**
   * Adds an answered submission and returns the best entry: the highest graded score, the earliest
   * answered on a tie; a failed submission only while none was graded (the paper's `max` over
   * scores.json, where a failure counts as 0, except that a2rl never names a failure best over a graded 0).
   */
  addAnswer(entry: SubmissionEntry): SubmissionEntry {
    this.answered.push(entry);
    this.lastSubmitTime = Date.parse(entry.timestamp) / 1000;
    const rank = (e: SubmissionEntry) => (e.error === undefined ? e.score : -1);
    return this.answered.reduce((best, e) => (rank(e) > rank(best) ? e : best));
  }

  get totalSubmissions(): number {
    return this.submissions;
  }

  /** A resumed run continues its numbering and its best score (the earlier answers are in its ledger). */
  continueFrom(submissions: number, best: number | null): void {
    this.submissions = submissions;
    this.best = best;
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
    const run = new ActiveRun(ctx, opts.deadline, opts.onSubmitted, opts.baselineScore, opts.envContext, opts.beforeGrading, opts.runMeta);
    if (opts.continueFrom) run.continueFrom(opts.continueFrom.submissions, opts.continueFrom.best);
    this.runs.set(ctx.runId, { run, tokenDigest: digest(ctx.token) });
    return run;
  }

  /**
   * Stops serving the run (its token is refused from now on), waits for submissions still being
   * graded, then records the rollouts not yet batched, finished or not, and closes the training
   * environment (its server is stopped).
   */
  async unregister(runId: string): Promise<void> {
    const entry = this.runs.get(runId);
    if (!entry) return;
    this.runs.delete(runId);
    await entry.run.drain();
    try {
      await entry.run.rollouts?.flush();
    } finally {
      await entry.run.closeEnvironment();
    }
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
