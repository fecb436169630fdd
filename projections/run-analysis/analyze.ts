import type { A2rlEvent, EventType } from '../../modules/ledger/events/catalog.js';
import { hasEnded } from '../../modules/ledger/run-lifecycle.js';
import { bestSubmissionId, foldRunScores, type RunScores } from '../../modules/ledger/run-scores.js';
import type { Evidence, FailureClass, ProcessMetrics, Route, RunAnalysis, SubmissionAnalysis } from './analysis.types.js';
import type { BlobReader } from '../blob-reader.js';
import { diffFiles, MAX_DIFF_BYTES } from './line-diff.js';
import { answeredModels, driverAttribution, llmAnalysis } from './llm.js';
import { optionalRepeats } from './grading-repeats.js';
import { optionalEnvCopy } from './env-copy.js';
import { classifyProcesses, type RunProcessKinds } from './process-kind.js';
import { declaredRoute, executedFamily, sortedUnique, type TextSource } from './routes.js';
import { eventTime } from '../../modules/ledger/events/event-time.js';
import { interruptionsOf, type Interruptions } from './interruptions.js';

// The post-hoc analysis of one run: a pure function of its events and of blobs read by sha256.
// Every rule implemented here is written down in docs/analysis.md; keep the two in step.

/** Code files larger than this are not scanned for route keywords (checkpoints or data dumped into code/). */
const MAX_SCANNED_BYTES = 1024 * 1024;
/** Exit codes of processes killed by SIGKILL/SIGTERM (128 + signal): a stop, not a code error. */
const KILLED_EXIT_CODES = new Set([137, 143]);
/** How long after its start an agent that exits "command not found" counts as never set up (a missing CLI). */
const SETUP_WINDOW_S = 60;
/** RunInterrupted reasons of a run that failed while it was being set up (modules/runs). */
const SETUP_REASON = /\bset-?up failed\b/i;
/** A shell's "no such command": bash `x: command not found`, dash `sh: 1: x: not found`. */
const COMMAND_NOT_FOUND = /command not found|^[^\n:]+: \d+: [^\n]+: not found$/m;
/** Call outcomes without an answer from the model in time: the upstream hung, the gateway closed the call, or the agent gave up waiting. */
const HANG_OUTCOMES = new Set(['upstream_timeout', 'gateway_closed', 'client_aborted']);

type Ev<T extends EventType> = Extract<A2rlEvent, { type: T }>;

interface ProcessRecord {
  start: Ev<'ProcessStarted'>;
  exit: Ev<'ProcessExited'> | null;
}

interface SubmissionRecord {
  id: string;
  /** SubmissionReceived, or SubmissionRejected when the submission was refused before archiving. */
  first: Ev<'SubmissionReceived'> | Ev<'SubmissionRejected'>;
  received: Ev<'SubmissionReceived'> | null;
  outcome: Ev<'SubmissionGraded'> | Ev<'SubmissionRejected'> | null;
}

interface CodeFile {
  path: string;
  sha256: string | null;
  size: number | null;
  seq: number;
}

/**
 * `eventCount`: how many events the run has when `input` holds only those the analysis reads
 * (AnalysisEvents, analysis-events.ts: the run's first and last among them); default all of them.
 */
export async function analyzeRun(input: A2rlEvent[], blobs: BlobReader, eventCount = input.length): Promise<RunAnalysis> {
  const events = [...input].sort((a, b) => a.seq - b.seq);
  const run = new RunFacts(events, new TextCache(blobs));
  const submissions = await run.submissionAnalyses();
  const metrics = run.metrics(submissions);
  const failure = await run.failure(submissions);
  const route = await run.runRoute(submissions);
  const best = run.best();
  const llm = llmAnalysis(events);
  const { interruptions } = run;
  return {
    runId: events[0]?.runId ?? '',
    task: run.scheduled?.data.task ?? null,
    agent: run.scheduled?.data.agent ?? null,
    ...driverAttribution(run.scheduled?.data.driver ?? null, llm, answeredModels(events)),
    baseModel: run.scheduled?.data.baseModel ?? null,
    budgetSeconds: run.scheduled?.data.budgetSeconds ?? null,
    mode: run.scheduled?.data.mode ?? null,
    state: run.state(),
    scheduledAt: run.scheduled?.occurredAt ?? null,
    baseline: run.baseline,
    baselineCached: run.baselineEvent?.data.cached ?? null,
    ...optionalRepeats(events),
    best,
    improvement: best !== null && run.baseline !== null ? round(best - run.baseline, 6) : null,
    durationS: run.agentSeconds(),
    exitReason: run.agentExited?.data.reason ?? null,
    sandbox: run.workspace?.data.sandbox ?? null,
    workspace: run.workspace?.data.workspace ?? null,
    submissions,
    pendingSubmissions: run.pending.length,
    metrics,
    failure,
    route,
    llm,
    ...optionalEnvCopy(events),
    ...(interruptions ? { interruptions } : {}),
    eventCount,
    lastSeq: events.length ? events[events.length - 1].seq : -1,
  };
}

/**
 * The failure class to show for a run: none (null) until it has ended (RunCompleted or
 * RunInterrupted recorded), since the taxonomy's rules judge a whole run, not one in progress.
 */
export function failureClassOf(a: Pick<RunAnalysis, 'state' | 'failure'>): FailureClass | null {
  return hasEnded(a.state) ? a.failure.class : null;
}

/** Blob text by sha256, read once per analysis; null when the blob is absent, too large or binary. */
class TextCache {
  private readonly texts = new Map<string, Promise<string | null>>();
  constructor(private readonly blobs: BlobReader) {}

  /** The blob's bytes, not kept (line counts need each version once or twice; texts are asked for repeatedly). */
  bytes(sha256: string): Promise<Buffer | null> {
    return this.blobs.read(sha256);
  }

  text(sha256: string): Promise<string | null> {
    let text = this.texts.get(sha256);
    if (!text) {
      text = this.blobs.read(sha256).then((buf) => (buf && buf.length <= MAX_SCANNED_BYTES && !buf.subarray(0, 8192).includes(0) ? buf.toString('utf8') : null));
      this.texts.set(sha256, text);
    }
    return text;
  }
}

/**
 * Whether a seq falls strictly between some process's start and its exit (any seq after the start
 * when it has not exited). The processes' intervals sorted by start with the furthest end so far:
 * one binary search per seq, not a pass over every process (a long run has 10^5 of each).
 */
function whileRunning(processes: ProcessRecord[]): (seq: number) => boolean {
  const inOrder = processes.every((p, i) => i === 0 || processes[i - 1].start.seq < p.start.seq);
  const ordered = inOrder ? processes : [...processes].sort((a, b) => a.start.seq - b.start.seq);
  const starts = new Float64Array(ordered.length);
  const furthest = new Float64Array(ordered.length);
  ordered.forEach((p, i) => {
    starts[i] = p.start.seq;
    furthest[i] = Math.max(p.exit?.seq ?? Infinity, i > 0 ? furthest[i - 1] : -Infinity);
  });
  return (seq) => {
    // how many processes started before seq
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid] < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 && furthest[lo - 1] > seq;
  };
}

const of = <T extends EventType>(events: A2rlEvent[], type: T): Ev<T>[] => events.filter((e): e is Ev<T> => e.type === type);
const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

class RunFacts {
  readonly scheduled: Ev<'RunScheduled'> | undefined;
  readonly workspace: Ev<'WorkspacePrepared'> | undefined;
  readonly baselineEvent: Ev<'BaselineEvaluated'> | undefined;
  readonly baseline: number | null;
  /** State, baseline, best and submissions: the run-scores fold, as every reader of a run folds them. */
  readonly scores: RunScores;
  readonly agentStarted: Ev<'AgentStarted'> | undefined;
  readonly agentExited: Ev<'AgentExited'> | undefined;
  readonly processes: ProcessRecord[];
  /** Kinds of the processes (process-kind.ts): an interpretation of the facts, made here. */
  readonly kinds: RunProcessKinds;
  /** Every process running a training program (launches and what they started). */
  readonly training: ProcessRecord[];
  /** Training launches: training processes no training process started. */
  readonly launches: ProcessRecord[];
  readonly rollouts: Ev<'RolloutBatchRecorded'>[];
  readonly codeChanges: Ev<'FileChanged'>[];
  /** Submissions with an outcome, in submission order; `pending` have none yet. */
  readonly done: SubmissionRecord[];
  readonly pending: SubmissionRecord[];
  readonly llmCalls: Ev<'LlmCallRecorded'>[];
  /** Losses of the harness (a resumed run): their downtime is not the agent's time. */
  readonly interruptions: Interruptions | null;
  private readonly baseFiles: string[];
  private readonly t0: string | undefined;

  constructor(readonly events: A2rlEvent[], private readonly texts: TextCache) {
    this.scheduled = of(events, 'RunScheduled')[0];
    this.workspace = of(events, 'WorkspacePrepared')[0];
    // The last one counts: an operator may re-set the baseline (POST /set_baseline).
    this.baselineEvent = of(events, 'BaselineEvaluated').at(-1);
    this.scores = foldRunScores(events);
    this.baseline = this.scores.baseline;
    this.agentStarted = of(events, 'AgentStarted')[0];
    this.agentExited = of(events, 'AgentExited').at(-1);
    const origin = this.agentStarted ?? this.scheduled ?? events[0];
    this.t0 = origin ? eventTime(origin) : undefined;
    this.processes = matchProcesses(events);
    this.kinds = classifyProcesses(events);
    this.training = this.processes.filter((p) => this.kinds.kindOf(p.start.seq) === 'training');
    this.launches = this.training.filter((p) => this.kinds.launches.has(p.start.seq));
    this.rollouts = of(events, 'RolloutBatchRecorded');
    this.codeChanges = of(events, 'FileChanged').filter((e) => e.data.path.startsWith('code/'));
    const all = collectSubmissions(events);
    this.done = all.filter((s) => s.outcome !== null);
    this.pending = all.filter((s) => s.outcome === null);
    this.llmCalls = of(events, 'LlmCallRecorded');
    this.interruptions = interruptionsOf(events);
    const prefix = this.scheduled ? `models/${this.scheduled.data.baseModel}/` : null;
    this.baseFiles = prefix
      ? (this.workspace?.data.dataManifest ?? []).filter((f) => f.path.startsWith(prefix)).map((f) => `${f.path.slice(prefix.length)}\0${f.sha256}`).sort()
      : [];
  }

  /** Seconds between two events' times (observation times for facts: see eventTime). */
  secondsBetween(from: { occurredAt: string; data?: unknown }, to: { occurredAt: string; data?: unknown }): number {
    return round((millis(eventTime(to)) - millis(eventTime(from))) / 1000, 3);
  }

  /** The agent's time: from its first start to its last exit, less the harness's downtime between (null until it exited). */
  agentSeconds(): number | null {
    if (!this.agentStarted || !this.agentExited) return null;
    return round(this.secondsBetween(this.agentStarted, this.agentExited) - (this.interruptions?.downtimeS ?? 0), 3);
  }

  atS(event: { occurredAt: string; data?: unknown }): number {
    return this.t0 === undefined ? 0 : this.secondsBetween({ occurredAt: this.t0 }, event);
  }

  state(): RunAnalysis['state'] {
    return this.scores.lifecycle.status;
  }

  best(): number | null {
    return this.scores.best;
  }

  /** The analysis of the first submission graded with the best score. */
  bestOf(subs: SubmissionAnalysis[]): SubmissionAnalysis | undefined {
    const id = bestSubmissionId(this.scores);
    return id === undefined ? undefined : subs.find((s) => s.submissionId === id);
  }

  /** Same set of (path relative to the checkpoint, sha256) as the base model's files in the workspace. */
  isCopyOfBase(received: Ev<'SubmissionReceived'> | null): boolean {
    if (!received || !this.baseFiles.length) return false;
    const files = received.data.manifest.map((f) => `${f.path}\0${f.sha256}`).sort();
    return files.length === this.baseFiles.length && files.every((f, i) => f === this.baseFiles[i]);
  }

  async submissionAnalyses(): Promise<SubmissionAnalysis[]> {
    const out: SubmissionAnalysis[] = [];
    const lines = await this.lineCounts(this.done.at(-1)?.first.seq ?? -1);
    let previousSeq = -1;
    for (const [i, s] of this.done.entries()) {
      const seq = s.first.seq;
      const outcome = s.outcome!;
      const graded = outcome.type === 'SubmissionGraded' ? outcome : null;
      const score = graded?.data.score ?? 0;
      const between = (e: { seq: number }) => e.seq > previousSeq && e.seq < seq;
      const rollouts = this.rollouts.filter(between);
      const episodes = sum(rollouts.map((r) => r.data.episodes));
      const isCopy = this.isCopyOfBase(s.received);
      const route = await this.submissionRoute(s, isCopy, previousSeq);
      const duplicateOf = graded?.data.details?.duplicateOf;
      out.push({
        index: i + 1,
        submissionId: s.id,
        seq,
        atS: this.atS(s.first),
        modelPath: s.received?.data.modelPath ?? null,
        checkpointSha256: s.received?.data.checkpoint?.sha256 ?? null,
        status: graded ? 'graded' : 'rejected',
        score,
        rejectedReason: outcome.type === 'SubmissionRejected' ? outcome.data.reasonClass : null,
        valid: score > 0,
        isCopyOfBase: isCopy,
        duplicateOf: typeof duplicateOf === 'string' ? duplicateOf : null,
        codeChanges: this.codeChanges.filter(between).map((e) => ({
          path: e.data.path,
          op: e.data.op,
          ...lines.get(e.seq)!,
          sha256: e.data.sha256 ?? null,
          previousSha256: e.data.previousSha256 ?? null,
          seq: e.seq,
        })),
        processes: this.processes.filter((p) => between(p.start)).map((p) => ({
          pid: p.start.data.pid,
          argv: p.start.data.argv,
          kind: this.kinds.kindOf(p.start.seq),
          startSeq: p.start.seq,
          exitSeq: p.exit?.seq ?? null,
          exitCode: p.exit?.data.exitCode ?? null,
          signal: p.exit?.data.signal ?? null,
          durationS: p.exit ? round(p.exit.data.durationMs / 1000, 3) : null,
        })),
        rollouts: {
          episodes,
          steps: sum(rollouts.map((r) => r.data.steps)),
          // Episode-weighted, so a small last batch does not count as much as a full one.
          successRate: episodes ? round(sum(rollouts.map((r) => r.data.successRate * r.data.episodes)) / episodes, 6) : 0,
          batches: rollouts.length,
        },
        route,
        evidence: sortedUnique([seq, outcome.seq]),
      });
      previousSeq = seq;
    }
    return out;
  }

  metrics(subs: SubmissionAnalysis[]): ProcessMetrics {
    const n = subs.length;
    const scores = subs.map((s) => s.score);
    const firstValid = subs.find((s) => s.valid);
    // Rejected submissions score 0: a best above 0 is the trajectory's maximum.
    const best = this.best();
    const firstBest = best !== null && best > 0 ? this.bestOf(subs) : undefined;
    const firstImprovement = this.baseline !== null ? subs.find((s) => s.score > this.baseline!) : undefined;
    let increases = 0;
    for (let i = 1; i < n; i++) if (scores[i] > scores[i - 1]) increases++;
    const budget = this.scheduled?.data.budgetSeconds;
    const used = this.agentSeconds();
    const trainingExits = this.launches.flatMap((p) => (p.exit ? [p.exit.data.durationMs] : []));
    const revisions: number[] = [];
    let previousSeq = -1;
    for (const s of subs) {
      revisions.push(this.codeChanges.filter((e) => e.seq > previousSeq && e.seq < s.seq).length);
      previousSeq = s.seq;
    }
    return {
      valid_submission_rate: n ? round(subs.filter((s) => s.valid).length / n, 6) : null,
      first_valid_idx: firstValid?.index ?? null,
      first_valid_delay: firstValid?.atS ?? null,
      score_trajectory: scores,
      time_to_first_improvement: firstImprovement?.atS ?? null,
      time_to_best: firstBest?.atS ?? null,
      monotonic_ratio: n >= 2 ? round(increases / (n - 1), 6) : null,
      copy_model_count: subs.filter((s) => s.isCopyOfBase).length,
      time_used_ratio: used !== null && budget ? round(Math.min(1, Math.max(0, used / budget)), 6) : null,
      last_submit_gap: n && this.agentExited ? this.secondsBetween(this.events.find((e) => e.seq === subs[n - 1].seq)!, this.agentExited) : null,
      training_launches: this.launches.length,
      total_training_time: round(sum(trainingExits) / 1000, 3),
      rollout_episodes: sum(this.rollouts.map((r) => r.data.episodes)),
      code_revisions_between_submissions: revisions,
    };
  }

  /**
   * Lines added and removed by each code change before `untilSeq`, by seq: the one line diff
   * (line-diff.ts, as in reports) of the content before and after it, read by sha256. 0 and 0 when
   * a side's content was not recorded or is not in the artifact store, and (as diffFiles counts)
   * for binary content or a side over MAX_DIFF_BYTES, which is never read.
   */
  private async lineCounts(untilSeq: number): Promise<Map<number, { linesAdded: number; linesRemoved: number }>> {
    const sizes = new Map<string, number>();
    for (const f of this.workspace?.data.dataManifest ?? []) sizes.set(f.sha256, f.size);
    for (const e of this.codeChanges) if (e.data.sha256 && e.data.size !== undefined) sizes.set(e.data.sha256, e.data.size);
    /** A side's bytes; undefined when they cannot be diffed (not recorded, too large, not stored). */
    const content = async (sha256: string | undefined): Promise<Buffer | undefined> =>
      !sha256 || (sizes.get(sha256) ?? 0) > MAX_DIFF_BYTES ? undefined : ((await this.texts.bytes(sha256)) ?? undefined);
    const counts = new Map<number, { linesAdded: number; linesRemoved: number }>();
    for (const e of this.codeChanges) {
      if (e.seq >= untilSeq) break;
      const before = e.data.op === 'create' ? null : await content(e.data.previousSha256);
      const after = e.data.op === 'delete' ? null : await content(e.data.sha256);
      const d = before === undefined || after === undefined ? null : diffFiles(before, after);
      counts.set(e.seq, { linesAdded: d?.linesAdded ?? 0, linesRemoved: d?.linesRemoved ?? 0 });
    }
    return counts;
  }

  // ---- routes ----

  /** code/ files as they were just before `seq` (deleted files gone). */
  private codeAt(seq: number): Map<string, CodeFile> {
    const files = new Map<string, CodeFile>();
    for (const e of this.codeChanges) {
      if (e.seq >= seq) break;
      if (e.data.op === 'delete') files.delete(e.data.path);
      else files.set(e.data.path, { path: e.data.path, sha256: e.data.sha256 ?? null, size: e.data.size ?? null, seq: e.seq });
    }
    return files;
  }

  private async sourcesOf(files: Iterable<CodeFile>): Promise<TextSource[]> {
    const sources: TextSource[] = [];
    for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
      const text = f.sha256 && (f.size ?? 0) <= MAX_SCANNED_BYTES ? await this.texts.text(f.sha256) : null;
      sources.push({ path: f.path, text: text ?? '', seqs: [f.seq] });
    }
    return sources;
  }

  /** Workspace-relative form of a path in argv (absolute inside the workspace, or relative to it). */
  private relative(arg: string, cwd: string): string | null {
    const value = arg.includes('=') && arg.startsWith('-') ? arg.slice(arg.indexOf('=') + 1) : arg;
    const ws = this.workspace?.data.workspace;
    const clean = value.replace(/\/+$/, '');
    if (ws && clean.startsWith(`${ws}/`)) return clean.slice(ws.length + 1);
    if (!clean.startsWith('/') && (!cwd || cwd === ws)) return clean.replace(/^(\.\/)+/, '');
    return null;
  }

  /**
   * Training processes behind a submission: those whose argv names the submitted path (or a folder
   * above it inside the workspace); else those started since the previous submission; else all before it.
   */
  private producers(s: SubmissionRecord, previousSeq: number): ProcessRecord[] {
    const before = this.training.filter((p) => p.start.seq < s.first.seq);
    const modelPath = s.received?.data.modelPath.replace(/\/+$/, '').replace(/^(\.\/)+/, '');
    if (modelPath) {
      const named = before.filter((p) =>
        p.start.data.argv.some((a) => {
          const rel = this.relative(a, p.start.data.cwd);
          return rel !== null && rel !== '' && (rel === modelPath || modelPath.startsWith(`${rel}/`));
        }),
      );
      if (named.length) return named;
    }
    const recent = before.filter((p) => p.start.seq > previousSeq);
    return recent.length ? recent : before;
  }

  /** The executed route of these processes: their argv, the code/ scripts their argv names, rollouts while they ran. */
  private async executed(processes: ProcessRecord[], until: number): Promise<{ route: Route; evidence: Evidence }> {
    if (!processes.length) return { route: 'none', evidence: [] };
    const code = this.codeAt(until);
    // One source per distinct command line, citing every process that ran it (a long run runs the
    // same few commands 10^5 times; the families found and their evidence are the same).
    const argvSeqs = new Map<string, number[]>();
    const scripts = new Map<string, CodeFile>();
    const looked = new Set<string>(); // command lines and directories whose scripts were looked up
    for (const p of processes) {
      const { argv, cwd } = p.start.data;
      const text = argv.join(' ');
      const seqs = argvSeqs.get(text);
      if (seqs) seqs.push(p.start.seq);
      else argvSeqs.set(text, [p.start.seq]);
      const where = `${cwd}\0${text}`;
      if (looked.has(where)) continue;
      looked.add(where);
      for (const a of argv) {
        const rel = this.relative(a, cwd);
        const file = rel !== null ? code.get(rel) : undefined;
        if (file) scripts.set(file.path, file);
      }
    }
    const sources: TextSource[] = [...argvSeqs].map(([text, seqs]) => ({ path: 'argv', text, seqs }));
    sources.push(...(await this.sourcesOf(scripts.values())));
    const running = whileRunning(processes);
    const during = this.rollouts.filter((r) => r.seq < until && r.data.episodes > 0 && running(r.seq));
    const family = executedFamily(sources, during.length > 0);
    const rolloutEvidence = during.length ? [during[0].seq, during[during.length - 1].seq] : [];
    return { route: family.route, evidence: sortedUnique([...processes.map((p) => p.start.seq), ...family.evidence, ...rolloutEvidence]) };
  }

  private async submissionRoute(s: SubmissionRecord, isCopy: boolean, previousSeq: number): Promise<SubmissionAnalysis['route']> {
    const declared = declaredRoute(await this.sourcesOf(this.codeAt(s.first.seq).values()));
    if (isCopy) return { declared: declared.route, executed: 'copy_model', evidence: sortedUnique([s.first.seq, ...declared.evidence]) };
    const executed = await this.executed(this.producers(s, previousSeq), s.first.seq);
    return { declared: declared.route, executed: executed.route, evidence: sortedUnique([...declared.evidence, ...executed.evidence]) };
  }

  /** The best submission's routes; without a graded submission, the routes of the whole run. */
  async runRoute(subs: SubmissionAnalysis[]): Promise<RunAnalysis['route']> {
    const chosen = this.bestOf(subs);
    if (chosen) return { best: chosen.route.executed, declared: chosen.route.declared, evidence: chosen.route.evidence };
    const end = Number.MAX_SAFE_INTEGER;
    const declared = declaredRoute(await this.sourcesOf(this.codeAt(end).values()));
    const executed = await this.executed(this.training, end);
    return { best: executed.route, declared: declared.route, evidence: sortedUnique([...declared.evidence, ...executed.evidence]) };
  }

  // ---- failure taxonomy (docs/analysis.md, "Failure taxonomy": first matching rule wins) ----

  async failure(subs: SubmissionAnalysis[]): Promise<RunAnalysis['failure']> {
    const verdict = (cls: FailureClass, rule: string, evidence: number[]) => ({ class: cls, rule, evidence: sortedUnique(evidence) });
    const baseline = this.baseline;
    const baselineSeq = this.baselineEvent ? [this.baselineEvent.seq] : [];
    const graded = subs.filter((s) => s.status === 'graded');
    const valid = subs.filter((s) => s.valid);
    const best = this.best();

    // 0. cancelled: the operator or a campaign stopped the agent; the run says nothing about the agent.
    const stoppedBy = this.agentExited?.data.stoppedBy;
    if (this.state() === 'cancelled' && this.agentExited && stoppedBy) return verdict('cancelled', `stopped_by_${stoppedBy}`, [this.agentExited.seq]);

    // 1. success
    if (best !== null && baseline !== null && best > baseline) {
      const first = this.bestOf(subs)!;
      return verdict('success', 'best_above_baseline', [...first.evidence, ...baselineSeq]);
    }

    // 2. infra_setup: the run, or the agent's command, was never set up (a failed set-up, a missing CLI).
    const state = this.state();
    const interrupted = state === 'interrupted' || state === 'setup_failed' ? of(this.events, 'RunInterrupted').at(-1) : undefined;
    // The recorded cause, or (runs recorded before it was kept) the reason's wording.
    if (interrupted && (state === 'setup_failed' || SETUP_REASON.test(interrupted.data.reason))) return verdict('infra_setup', 'setup_failed', [interrupted.seq]);
    const missing = await this.missingCommand(subs);
    if (missing) return verdict('infra_setup', 'agent_command_not_found', missing);

    // 3. infra_error: the harness or the evaluator failed; never blamed on the agent.
    if (interrupted) return verdict('infra_error', 'run_interrupted', [interrupted.seq]);
    const faults = subs.filter((s) => s.rejectedReason === 'evaluator_error' || s.rejectedReason === 'infra_error');
    if (faults.length) return verdict('infra_error', 'evaluator_fault', faults.flatMap((s) => s.evidence));
    if (this.agentExited && !this.agentStarted) return verdict('infra_error', 'agent_not_started', [this.agentExited.seq]);
    if (this.agentExited?.data.reason === 'killed') return verdict('infra_error', 'agent_killed_by_harness', [this.agentExited.seq]);
    const completed = of(this.events, 'RunCompleted').at(-1);
    if (baseline === null && completed) return verdict('infra_error', 'missing_baseline', [completed.seq]);

    // 4. infra_llm_limit: the operator's limit on model tokens or cost refused a call (--max-llm-*).
    const limited = this.llmCalls.filter((c) => c.data.outcome === 'limit_exceeded');
    if (limited.length) {
      const reached = of(this.events, 'LimitReached').filter((e) => /llm/i.test(e.data.limit));
      return verdict('infra_llm_limit', 'llm_limit_exceeded', [limited[0].seq, ...reached.map((e) => e.seq)]);
    }

    // 5. infra_model_unreachable: an LLM-driven agent never got an answer from its model.
    const unreachable = this.modelUnreachable();
    if (unreachable) return verdict('infra_model_unreachable', unreachable.rule, unreachable.evidence);

    // 6. copy_model_fallback: the best graded score was reached by a copy of the base model.
    const copies = graded.filter((s) => s.isCopyOfBase && s.score === best);
    if (copies.length) return verdict('copy_model_fallback', 'best_is_copy_of_base', [...copies.flatMap((s) => s.evidence), ...baselineSeq]);

    // 7. code_error_runtime: the last runtime error in the agent's code was not recovered from.
    const error = await this.unrecoveredCodeError(valid);
    if (error) return verdict('code_error_runtime', error.rule, error.evidence);

    // 8. timeout_no_submission
    const inBudget = subs.filter((s) => s.rejectedReason !== 'budget_exhausted');
    if (!inBudget.length) {
      const late = subs.filter((s) => s.rejectedReason === 'budget_exhausted');
      if (late.length) return verdict('timeout_no_submission', 'submitted_after_deadline', late.flatMap((s) => s.evidence));
      if (this.agentExited?.data.reason === 'timeout') return verdict('timeout_no_submission', 'no_submission_before_timeout', [this.agentExited.seq]);
    }

    // 9. invalid_checkpoint: nothing submitted was valid, and the grader could not load (or find) it.
    const refused = subs.filter((s) => s.rejectedReason === 'invalid_checkpoint' || s.rejectedReason === 'invalid_path');
    if (!valid.length && refused.length) return verdict('invalid_checkpoint', 'no_valid_submission_refused', refused.flatMap((s) => s.evidence));

    // 10. rollout_logic_wrong: rollouts were recorded, and not one episode of any batch succeeded.
    const batches = this.rollouts.filter((r) => r.data.episodes > 0);
    if (batches.length && batches.every((r) => r.data.successRate === 0)) {
      return verdict('rollout_logic_wrong', 'all_rollouts_failed', batches.map((r) => r.seq));
    }

    // 11. training_diverged: training ran, and every valid submission scored below the baseline.
    if (valid.length && baseline !== null && valid.every((s) => s.score < baseline)) {
      const trainedBefore = this.training.filter((p) => p.start.seq < valid[valid.length - 1].seq);
      if (trainedBefore.length) {
        return verdict('training_diverged', 'valid_below_baseline_after_training', [
          ...valid.flatMap((s) => s.evidence),
          ...trainedBefore.map((p) => p.start.seq),
          ...baselineSeq,
        ]);
      }
    }

    // 12. agent_crash
    if (this.agentExited?.data.reason === 'crashed') return verdict('agent_crash', 'agent_exited_crashed', [this.agentExited.seq]);

    // 13. no_improvement: everything else.
    if (valid.length) return verdict('no_improvement', 'best_not_above_baseline', [...graded.filter((s) => s.score === best).flatMap((s) => s.evidence), ...baselineSeq]);
    if (subs.length) return verdict('no_improvement', 'no_valid_submission', subs.flatMap((s) => s.evidence));
    if (this.agentExited) return verdict('no_improvement', 'no_submission', [this.agentExited.seq]);
    return verdict('no_improvement', 'run_in_progress', this.events.length ? [this.events[this.events.length - 1].seq] : []);
  }

  /**
   * A missing agent command: the agent exited within SETUP_WINDOW_S of its start with exit code 127,
   * or non-zero with a shell's "command not found" on stderr, before any model call or submission.
   */
  private async missingCommand(subs: SubmissionAnalysis[]): Promise<number[] | null> {
    const { agentStarted: started, agentExited: exited } = this;
    if (!started || !exited || this.llmCalls.length || subs.length || this.pending.length) return null;
    if (this.secondsBetween(started, exited) > SETUP_WINDOW_S || exited.data.exitCode === 0) return null;
    if (exited.data.exitCode === 127) return [started.seq, exited.seq];
    for (const e of of(this.events, 'AgentOutput')) {
      if (e.data.stream !== 'stderr') continue;
      const text = await this.texts.text(e.data.chunk.sha256);
      if (text !== null && COMMAND_NOT_FOUND.test(text)) return [started.seq, e.seq, exited.seq];
    }
    return null;
  }

  /**
   * An LLM-driven agent (AgentStarted.gateway) that has exited without one answered model call:
   * it never called (`model_never_called`), every call went unanswered in time (`model_calls_hung`),
   * or failed otherwise — upstream errors, unreachable, refused (`model_calls_failed`).
   */
  private modelUnreachable(): { rule: string; evidence: number[] } | null {
    const { agentStarted: started, agentExited: exited } = this;
    if (!started?.data.gateway || !exited || this.llmCalls.some((c) => c.data.outcome === 'ok')) return null;
    if (!this.llmCalls.length) return { rule: 'model_never_called', evidence: [started.seq, exited.seq] };
    const hung = this.llmCalls.every((c) => HANG_OUTCOMES.has(c.data.outcome));
    return { rule: hung ? 'model_calls_hung' : 'model_calls_failed', evidence: [started.seq, ...this.llmCalls.map((c) => c.seq), exited.seq] };
  }

  /**
   * Runtime errors: a training process that exited with a non-zero code (not 137/143), or a stderr
   * chunk of the agent showing an uncaught error with a stack frame in a code/ file. The last one is
   * unrecovered when no training process started after it ended without such an error and no valid
   * submission came after it.
   */
  private async unrecoveredCodeError(valid: SubmissionAnalysis[]): Promise<{ rule: string; evidence: number[] } | null> {
    const failed = (p: ProcessRecord) => {
      const code = p.exit?.data.exitCode;
      return code !== undefined && code !== 0 && !KILLED_EXIT_CODES.has(code);
    };
    const errors: { seq: number; rule: string; evidence: number[] }[] = [];
    for (const p of this.training) {
      if (failed(p)) errors.push({ seq: p.exit!.seq, rule: 'training_exited_nonzero', evidence: [p.start.seq, p.exit!.seq] });
    }
    for (const e of of(this.events, 'AgentOutput')) {
      if (e.data.stream !== 'stderr') continue;
      const text = await this.texts.text(e.data.chunk.sha256);
      if (text !== null && UNCAUGHT_ERROR.test(text) && CODE_FRAME.test(text)) {
        errors.push({ seq: e.seq, rule: 'uncaught_error_in_code', evidence: [e.seq] });
      }
    }
    if (!errors.length) return null;
    const last = errors.reduce((a, b) => (b.seq > a.seq ? b : a));
    const retried = this.training.some((p) => p.start.seq > last.seq && !failed(p));
    const submittedAfter = valid.some((s) => s.seq > last.seq);
    return retried || submittedAfter ? null : { rule: last.rule, evidence: last.evidence };
  }
}

/** A Python or JavaScript exception line, e.g. `TypeError: …`, `torch.OutOfMemoryError: …`. */
const UNCAUGHT_ERROR = /Traceback \(most recent call last\)|^(?:Uncaught )?(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b/m;
/** A stack frame in a file under code/: Python `File ".../code/x.py", line N`, JS `at .../code/x.js:N` or `file:///.../code/x.mjs:N`. */
const CODE_FRAME = /File "(?:[^"\n]*\/)?code\/[^"\n]+", line \d+|(?:\bat |file:\/\/)[^\n]*?\/code\/[^\s:()]+:\d+/;

/** Each ProcessExited is matched to the latest still-open ProcessStarted of the same pid before it. */
function matchProcesses(events: A2rlEvent[]): ProcessRecord[] {
  const records: ProcessRecord[] = [];
  const open = new Map<number, ProcessRecord[]>();
  for (const e of events) {
    if (e.type === 'ProcessStarted') {
      const record: ProcessRecord = { start: e, exit: null };
      records.push(record);
      const running = open.get(e.data.pid);
      if (running) running.push(record);
      else open.set(e.data.pid, [record]);
    } else if (e.type === 'ProcessExited') {
      const running = open.get(e.data.pid);
      const record = running?.pop();
      if (record) record.exit = e;
      if (running?.length === 0) open.delete(e.data.pid);
    }
  }
  return records;
}

/** Submissions by id, in the order they were first recorded, with their outcome. */
function collectSubmissions(events: A2rlEvent[]): SubmissionRecord[] {
  const byId = new Map<string, SubmissionRecord>();
  for (const e of events) {
    if (e.type !== 'SubmissionReceived' && e.type !== 'SubmissionGraded' && e.type !== 'SubmissionRejected') continue;
    const id = e.data.submissionId;
    let s = byId.get(id);
    if (!s) {
      if (e.type === 'SubmissionGraded') continue; // a grade without a submission: nothing to attach it to
      s = { id, first: e, received: null, outcome: null };
      byId.set(id, s);
    }
    if (e.type === 'SubmissionReceived') s.received ??= e;
    else s.outcome ??= e;
  }
  return [...byId.values()];
}

/** Milliseconds of an ISO-8601 UTC timestamp; digits below the millisecond are dropped. */
function millis(iso: string): number {
  return Date.parse(iso.replace(/(\.\d{3})\d+Z$/, '$1Z'));
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

