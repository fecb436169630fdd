import type { Evidence, LlmAnalysis, ProcessMetrics, RunAnalysis, SubmissionAnalysis } from '../../projections/run-analysis/analysis.types.js';
import type { BlobReader } from '../../projections/blob-reader.js';
import { diffFiles, type Hunk } from '../../projections/run-analysis/line-diff.js';
import type { A2rlEvent, Cause } from '../ledger/events/catalog.js';
import { classifyProcesses, type RunProcessKinds } from '../../projections/run-analysis/process-kind.js';
import { eventTime } from '../ledger/events/event-time.js';
import { bestSubmissionId, foldRunScores } from '../ledger/run-scores.js';
import { workspaceIntegrity, type WorkspaceIntegrity } from '../../projections/run-analysis/integrity.js';
import { buildTranscript, type Transcript, type TranscriptEntry } from '../../projections/transcript/transcript.js';
import { limitAction } from '../../projections/derived-facts.js';

// The run report's model: what a report says, before any format. It is assembled when a report is
// asked for, from the run-analysis row (a projection), the run's events and blobs read by sha256, and
// is as deterministic as they are. It is not a projection: nothing stores it, so it has no version to
// rebuild; storing it per run would re-read every code blob on each new event of a live run.

export interface ReportInput {
  analysis: RunAnalysis;
  /** The run's events in seq order (the same ones the analysis was derived from). */
  events: readonly A2rlEvent[];
  blobs: BlobReader;
  /** Task level (1–3) when the task pack is known to the caller. */
  level?: number | null;
  /**
   * Agent output chunks of a stream that `events` leaves out (verify holds only a stream's last
   * chunks: projections/run-analysis/analysis-events.ts), counted into the output section.
   */
  omittedOutput?: OmittedOutput;
}

export type OmittedOutput = Partial<Record<'stdout' | 'stderr', { chunks: number; bytes: number }>>;

export interface FileChangeReport {
  path: string;
  /** Net change over the window: created, modified, deleted, or created and deleted again. */
  op: 'create' | 'modify' | 'delete' | 'transient';
  fromSha256: string | null;
  toSha256: string | null;
  linesAdded: number;
  linesRemoved: number;
  hunks: Hunk[];
  omittedHunks: number;
  note: string | null;
  evidence: Evidence;
}

export interface ProcessReport {
  pid: number;
  argv: string[];
  kind: string;
  startS: number;
  endS: number | null;
  exitCode: number | null;
  signal: string | null;
  durationS: number | null;
  evidence: Evidence;
  /** The model call whose tool call started it (ProcessStarted.causedBy); absent when none was matched, so older reports keep their bytes. */
  startedBy?: CauseReport;
}

/** A followed `causedBy` link: the cause's seq and the evidence it was made on. */
export interface CauseReport {
  seq: number;
  pid?: number;
  submissionId?: string;
  toolCallId?: string;
  command?: string;
}

export interface SubmissionReport {
  index: number;
  submissionId: string;
  status: SubmissionAnalysis['status'];
  score: number;
  valid: boolean;
  rejectedReason: string | null;
  isCopyOfBase: boolean;
  duplicateOf: string | null;
  modelPath: string | null;
  checkpointSha256: string | null;
  atS: number;
  sincePreviousS: number;
  route: SubmissionAnalysis['route'];
  code: { files: FileChangeReport[]; linesAdded: number; linesRemoved: number };
  processes: ProcessReport[];
  rollouts: SubmissionAnalysis['rollouts'] & { evidence: Evidence };
  evidence: Evidence;
  /** The grading or rejection and the SubmissionReceived it names as its cause; absent for runs recorded before causes were. */
  outcome?: { seq: number; type: 'SubmissionGraded' | 'SubmissionRejected'; causedBy: CauseReport };
}

export interface TimelineItem {
  lane: 'training' | 'evaluation' | 'install' | 'agent-tool' | 'other' | 'files' | 'rollouts' | 'submissions' | 'model-calls';
  startS: number;
  endS: number | null;
  label: string;
  seq: number;
}

/** The structured run report; the JSON format is exactly this object as canonical JSON. */
export interface RunReport {
  schema: 'a2rl.run-report/1';
  run: {
    runId: string;
    task: string | null;
    level: number | null;
    agent: string | null;
    /** The model the agent used most (its model calls), else the declared driver. */
    driver: string | null;
    /** RunScheduled.driver; present, with driverMismatch, only for LLM-driven runs (those with `llm`). */
    declaredDriver?: string | null;
    driverMismatch?: boolean;
    baseModel: string | null;
    mode: string | null;
    budgetSeconds: number | null;
    state: RunAnalysis['state'];
    scheduledAt: string | null;
    durationS: number | null;
    exitReason: string | null;
    sandbox: string | null;
    workspace: string | null;
    eventCount: number;
    lastSeq: number;
    /** Losses of the harness and resumes (present only for a run that had one). */
    interruptions?: RunAnalysis['interruptions'];
    evidence: { scheduled: Evidence; workspace: Evidence; lifecycle: Evidence };
  };
  scores: { baseline: number | null; best: number | null; improvement: number | null; baselineEvidence: Evidence; bestEvidence: Evidence };
  failure: RunAnalysis['failure'];
  route: RunAnalysis['route'];
  metrics: ProcessMetrics;
  metricsEvidence: Record<keyof ProcessMetrics, Evidence>;
  submissions: SubmissionReport[];
  /**
   * Items in seq order. A lane with more than TIMELINE_LANE_ITEMS items shows that many, evenly
   * spaced over the lane's items (its first included): `thinned` then says, per lane, how many are
   * shown of how many; absent when no lane is thinned. Every item's event is in the ledger.
   */
  timeline: { endS: number; items: TimelineItem[]; thinned?: Partial<Record<TimelineItem['lane'], { shown: number; of: number }>> };
  /**
   * The read-only world's checks (WorkspaceIntegrityChecked), folded. Absent, not null, when the run
   * recorded none: reports of runs from before the checks stay byte-identical (bundles re-render them).
   */
  integrity?: WorkspaceIntegrity;
  /**
   * The run's model calls (analysis.llm) and their transcript, texts cut at REPORT_TEXT_LIMIT
   * characters. Absent, not null, for a run that is not LLM-driven and recorded no call: reports of
   * such runs stay byte-identical to those rendered before model calls were recorded.
   */
  llm?: LlmAnalysis;
  transcript?: Transcript;
  /** Signs of an own copy of the interactive environment (analysis.envCopy); absent when none. */
  envCopy?: RunAnalysis['envCopy'];
  /** Each limit the run reached (LimitReached), with how far past its maximum the value went; absent when none. */
  limits?: LimitReport[];
  /**
   * The end of the agent's own output (AgentOutput chunks), at most OUTPUT_TAIL_BYTES per stream.
   * LLM-driven runs only (absent otherwise, so other reports keep their bytes): `a2rl logs` has all of it.
   */
  output?: OutputReport;
}

export interface LimitReport {
  limit: string;
  value: number;
  max: number;
  /** value − max when the value went past the maximum (an overrun: calls in flight when the cap was reached), else 0. */
  over: number;
  scope: string | null;
  action: string;
  seq: number;
  /** What reached it (LimitReached.causedBy); absent when not recorded. */
  causedBy?: CauseReport;
}

export interface OutputReport {
  chunks: number;
  bytes: number;
  streams: { stream: 'stdout' | 'stderr'; chunks: number; bytes: number; tail: string; cut: boolean; missing: number; evidence: Evidence }[];
}

/** Bytes of each output stream the report shows (its end). */
export const OUTPUT_TAIL_BYTES = 4096;

/** Texts of the transcript (prompts, tool results and inputs, answers) are cut here in reports. */
export const REPORT_TEXT_LIMIT = 600;

export function clipText(text: string, limit = REPORT_TEXT_LIMIT): string {
  return text.length > limit ? `${text.slice(0, limit)}… (${text.length - limit} more characters)` : text;
}

function clippedEntry(e: TranscriptEntry): TranscriptEntry {
  const clip = (t: string | null) => (t === null ? null : clipText(t));
  return {
    ...e,
    request: { ...e.request, userText: clip(e.request.userText), toolResults: e.request.toolResults.map((r) => ({ ...r, output: clipText(r.output) })) },
    answer: { ...e.answer, text: clip(e.answer.text), toolCalls: e.answer.toolCalls.map((c) => ({ ...c, input: clipText(c.input) })) },
  };
}

/** The transcript as reports show it: every call, its texts cut at REPORT_TEXT_LIMIT. */
export function reportTranscript(events: readonly A2rlEvent[]): Transcript {
  const transcript = buildTranscript(events);
  return { ...transcript, entries: transcript.entries.map(clippedEntry) };
}

const sortedUnique = (seqs: number[]): Evidence => [...new Set(seqs)].sort((a, b) => a - b);
const ms = (s: number) => Math.round(s * 1000) / 1000;

/** Seconds from AgentStarted (else RunScheduled, else the first event) to each event. */
function clockOf(events: readonly A2rlEvent[]): (seq: number) => number {
  const origin = events.find((e) => e.type === 'AgentStarted') ?? events.find((e) => e.type === 'RunScheduled') ?? events[0];
  const t0 = origin ? Date.parse(eventTime(origin)) : 0;
  const bySeq = eventsBySeq(events);
  return (seq) => {
    const e = bySeq(seq);
    return ms(((e ? Date.parse(eventTime(e)) : t0) - t0) / 1000);
  };
}

/**
 * The event at a seq: a binary search when the events are in strictly increasing seq order (as a
 * report's input is), so a long run's report holds no index of every event; else a map (the last wins).
 */
function eventsBySeq(events: readonly A2rlEvent[]): (seq: number) => A2rlEvent | undefined {
  if (events.some((e, i) => i > 0 && events[i - 1].seq >= e.seq)) {
    const bySeq = new Map(events.map((e) => [e.seq, e]));
    return (seq) => bySeq.get(seq);
  }
  return (seq) => {
    let [lo, hi] = [0, events.length - 1];
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (events[mid].seq === seq) return events[mid];
      if (events[mid].seq < seq) lo = mid + 1;
      else hi = mid - 1;
    }
    return undefined;
  };
}

async function fileChanges(changes: SubmissionAnalysis['codeChanges'], blobs: BlobReader): Promise<FileChangeReport[]> {
  const byPath = new Map<string, SubmissionAnalysis['codeChanges']>();
  for (const c of [...changes].sort((a, b) => a.seq - b.seq)) byPath.set(c.path, [...(byPath.get(c.path) ?? []), c]);
  const paths = [...byPath.keys()].sort();
  const files: FileChangeReport[] = [];
  for (const path of paths) {
    const list = byPath.get(path)!;
    const first = list[0];
    const last = list[list.length - 1];
    const from = first.op === 'create' ? null : first.previousSha256;
    const to = last.op === 'delete' ? null : last.sha256;
    const op = from === null ? (to === null ? 'transient' : 'create') : to === null ? 'delete' : 'modify';
    const [before, after] = await Promise.all([from ? blobs.read(from) : null, to ? blobs.read(to) : null]);
    const missing = (from !== null && before === null) || (to !== null && after === null);
    // Without the content, the analysis's per-change counts (the same diff, computed when it was built) are all there is.
    const diff = missing
      ? {
          linesAdded: list.reduce((n, c) => n + c.linesAdded, 0),
          linesRemoved: list.reduce((n, c) => n + c.linesRemoved, 0),
          hunks: [],
          omittedHunks: 0,
          note: 'content not in the artifact store: counts from the analysis, diff not shown',
        }
      : diffFiles(before, after);
    files.push({ path, op, fromSha256: from, toSha256: to, ...diff, evidence: sortedUnique(list.map((c) => c.seq)) });
  }
  return files;
}

function timeline(input: ReportInput, at: (seq: number) => number, kinds: RunProcessKinds): RunReport['timeline'] {
  const items: TimelineItem[] = [];
  const open = new Map<number, TimelineItem | null>(); // pid → its running process bar (null: one the lane does not show)
  const scoreOf = new Map(input.analysis.submissions.map((s) => [s.submissionId, s.score]));
  const laneOf = (e: A2rlEvent): TimelineItem['lane'] | null => (e.type === 'ProcessStarted' ? kinds.kindOf(e.seq) : (LANE_OF_TYPE[e.type] ?? null));
  const shown = laneSampler(input.events, laneOf);
  for (const e of input.events) {
    const lane = laneOf(e);
    if (lane === null) {
      if (e.type === 'ProcessExited') {
        const item = open.get(e.data.pid);
        if (item) item.endS = at(e.seq);
        open.delete(e.data.pid);
      }
      continue;
    }
    const item = shown.take(lane) ? timelineItem(e, lane, at, scoreOf) : null;
    if (e.type === 'ProcessStarted') open.set(e.data.pid, item);
    if (item) items.push(item);
  }
  const last = input.events[input.events.length - 1];
  return { endS: Math.max(input.analysis.budgetSeconds ?? 0, last ? at(last.seq) : 0), items, ...(shown.thinned() ? { thinned: shown.thinned() } : {}) };
}

/** The lane of each event type with a timeline item, but processes (their lane is their kind). */
const LANE_OF_TYPE: Partial<Record<A2rlEvent['type'], TimelineItem['lane']>> = {
  FileChanged: 'files',
  RolloutBatchRecorded: 'rollouts',
  LlmCallRecorded: 'model-calls',
  SubmissionReceived: 'submissions',
};

function timelineItem(e: A2rlEvent, lane: TimelineItem['lane'], at: (seq: number) => number, scoreOf: ReadonlyMap<string, number | null>): TimelineItem | null {
  switch (e.type) {
    case 'ProcessStarted':
      return { lane, startS: at(e.seq), endS: null, label: e.data.argv.join(' '), seq: e.seq };
    case 'FileChanged':
      return { lane, startS: at(e.seq), endS: null, label: `${e.data.op} ${e.data.path}`, seq: e.seq };
    case 'RolloutBatchRecorded':
      return { lane, startS: at(e.seq), endS: null, label: `${e.data.episodes} episodes, success rate ${e.data.successRate}`, seq: e.seq };
    case 'LlmCallRecorded': {
      // The call's bar ends when it was recorded and starts its latency before.
      const endS = at(e.seq);
      const tokens = (e.data.usage.inputTokens ?? 0) + (e.data.usage.outputTokens ?? 0);
      return { lane, startS: ms(Math.max(0, endS - e.data.latencyMs / 1000)), endS, label: `${e.data.modelAnswered ?? e.data.modelRequested ?? e.data.api}: ${e.data.outcome}, ${tokens} tokens`, seq: e.seq };
    }
    case 'SubmissionReceived': {
      const score = scoreOf.get(e.data.submissionId);
      return { lane, startS: at(e.seq), endS: null, label: `${e.data.submissionId}${score === undefined ? '' : ` score ${score}`}`, seq: e.seq };
    }
    default:
      return null;
  }
}

/**
 * Items a timeline lane shows at most: a chart cannot show more apart (it is ~900 px wide), and a
 * long run's report (a 1M-event run has hundreds of thousands of file changes and processes)
 * stays small enough to render and verify in bounded memory. The cap is deterministic.
 */
export const TIMELINE_LANE_ITEMS = 2000;

/**
 * Which items each lane shows, asked in the items' order: all of a lane of at most
 * TIMELINE_LANE_ITEMS, else that many evenly spaced (the i-th shown is item ⌊i·n/cap⌋ of n), so the
 * items not shown are never built. Lanes are counted in a first pass over the events.
 */
function laneSampler(events: readonly A2rlEvent[], laneOf: (e: A2rlEvent) => TimelineItem['lane'] | null) {
  const total = new Map<TimelineItem['lane'], number>();
  for (const e of events) {
    const lane = laneOf(e);
    if (lane !== null) total.set(lane, (total.get(lane) ?? 0) + 1);
  }
  const seen = new Map<TimelineItem['lane'], { index: number; taken: number }>();
  return {
    take(lane: TimelineItem['lane']): boolean {
      const n = total.get(lane)!;
      const at = seen.get(lane) ?? { index: 0, taken: 0 };
      seen.set(lane, at);
      const index = at.index++;
      if (n <= TIMELINE_LANE_ITEMS) return true;
      if (at.taken < TIMELINE_LANE_ITEMS && index === Math.floor((at.taken * n) / TIMELINE_LANE_ITEMS)) {
        at.taken += 1;
        return true;
      }
      return false;
    },
    thinned(): RunReport['timeline']['thinned'] | undefined {
      const lanes = [...total].filter(([, n]) => n > TIMELINE_LANE_ITEMS).sort(([a], [b]) => (a < b ? -1 : 1));
      return lanes.length ? Object.fromEntries(lanes.map(([lane, n]) => [lane, { shown: TIMELINE_LANE_ITEMS, of: n }])) : undefined;
    },
  };
}

/** Each event's `causedBy`, as the report shows it, by the event's seq. */
function causesOf(events: readonly A2rlEvent[]): Map<number, CauseReport> {
  const causes = new Map<number, CauseReport>();
  for (const e of events) {
    const cause = 'causedBy' in e.data ? e.data.causedBy : undefined;
    if (cause) causes.set(e.seq, causeReport(cause));
  }
  return causes;
}

function causeReport({ event: _id, ...cause }: Cause): CauseReport {
  return cause;
}

function processesOf(s: SubmissionAnalysis, at: (seq: number) => number, causes: ReadonlyMap<number, CauseReport>): ProcessReport[] {
  return s.processes.map((p) => ({
    pid: p.pid,
    argv: p.argv,
    kind: p.kind,
    startS: at(p.startSeq),
    endS: p.exitSeq === null ? null : at(p.exitSeq),
    exitCode: p.exitCode,
    signal: p.signal,
    durationS: p.durationS,
    evidence: p.exitSeq === null ? [p.startSeq] : [p.startSeq, p.exitSeq],
    ...(causes.has(p.startSeq) ? { startedBy: causes.get(p.startSeq)! } : {}),
  }));
}

function metricsEvidence(a: RunAnalysis, events: readonly A2rlEvent[], launches: ReadonlySet<number>): Record<keyof ProcessMetrics, Evidence> {
  const subs = a.submissions;
  const all = subs.map((s) => s.seq);
  const seqsOf = (type: A2rlEvent['type']) => events.filter((e) => e.type === type).map((e) => e.seq);
  const firstValid = subs.find((s) => s.valid);
  const firstImproving = a.baseline === null ? undefined : subs.find((s) => s.status === 'graded' && s.score > a.baseline!);
  const best = subs.length ? subs.reduce((m, s) => (s.score > m.score ? s : m)) : undefined;
  const bounds = sortedUnique([...seqsOf('AgentStarted'), ...seqsOf('AgentExited'), ...seqsOf('RunCompleted')]);
  // Training launches as the analysis counts them (process-kind.ts), each with its own exit.
  const training = events.filter((e) => e.type === 'ProcessStarted' && launches.has(e.seq));
  const trainingExits = exitsOf(events, launches);
  return {
    valid_submission_rate: all,
    first_valid_idx: firstValid ? [firstValid.seq] : all,
    first_valid_delay: firstValid ? sortedUnique([...bounds.slice(0, 1), firstValid.seq]) : all,
    score_trajectory: sortedUnique(subs.flatMap((s) => s.evidence.concat(s.seq))),
    time_to_first_improvement: firstImproving ? sortedUnique([...seqsOf('BaselineEvaluated'), firstImproving.seq]) : sortedUnique([...seqsOf('BaselineEvaluated'), ...all]),
    time_to_best: best ? [best.seq] : [],
    monotonic_ratio: all,
    copy_model_count: subs.some((s) => s.isCopyOfBase) ? subs.filter((s) => s.isCopyOfBase).map((s) => s.seq) : all,
    time_used_ratio: sortedUnique([...bounds, ...all.slice(-1)]),
    last_submit_gap: sortedUnique([...bounds, ...all.slice(-1)]),
    training_launches: training.map((e) => e.seq),
    total_training_time: sortedUnique([...training.map((e) => e.seq), ...trainingExits]),
    rollout_episodes: seqsOf('RolloutBatchRecorded'),
    code_revisions_between_submissions: sortedUnique(subs.flatMap((s) => s.codeChanges.map((c) => c.seq))),
  };
}

/**
 * The seq of each launch's exit: the first ProcessExited of its pid after it (events in seq order).
 * One pass with the launches waiting per pid, not a search of the run per launch: a run of 1M
 * events has tens of thousands of launches.
 */
function exitsOf(events: readonly A2rlEvent[], launches: ReadonlySet<number>): number[] {
  const waiting = new Map<unknown, number>(); // pid -> launches not yet exited
  const exits: number[] = [];
  for (const e of events) {
    if (e.type === 'ProcessStarted' && launches.has(e.seq)) waiting.set(e.data.pid, (waiting.get(e.data.pid) ?? 0) + 1);
    else if (e.type === 'ProcessExited' && waiting.has(e.data.pid)) {
      // Every launch of this pid still waiting exits here (the same exit, as a search from each would find).
      for (let n = waiting.get(e.data.pid)!; n > 0; n--) exits.push(e.seq);
      waiting.delete(e.data.pid);
    }
  }
  return exits;
}

function limitsOf(events: readonly A2rlEvent[], causes: ReadonlyMap<number, CauseReport>): LimitReport[] {
  return events.flatMap((e) =>
    e.type === 'LimitReached'
      ? [{ limit: e.data.limit, value: e.data.value, max: e.data.max, over: e.data.value > e.data.max ? e.data.value - e.data.max : 0, scope: e.data.scope ?? null, action: limitAction(e.data), seq: e.seq, ...(causes.has(e.seq) ? { causedBy: causes.get(e.seq)! } : {}) }]
      : [],
  );
}

/** The last OUTPUT_TAIL_BYTES of each stream, read from its last chunks backwards (never the whole output of a long run). */
async function outputOf(events: readonly A2rlEvent[], blobs: BlobReader, omitted: OmittedOutput = {}): Promise<OutputReport | null> {
  const chunks = events.filter((e): e is Extract<A2rlEvent, { type: 'AgentOutput' }> => e.type === 'AgentOutput');
  if (!chunks.length) return null;
  const streams: OutputReport['streams'] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const mine = chunks.filter((c) => c.data.stream === stream);
    if (!mine.length) continue;
    const left = omitted[stream] ?? { chunks: 0, bytes: 0 };
    const bytes = mine.reduce((n, c) => n + c.data.chunk.size, left.bytes);
    const parts: Buffer[] = [];
    const evidence: number[] = [];
    let have = 0;
    let missing = 0;
    for (let i = mine.length - 1; i >= 0 && have < OUTPUT_TAIL_BYTES; i--) {
      const body = await blobs.read(mine[i].data.chunk.sha256);
      evidence.unshift(mine[i].seq);
      if (!body) {
        missing++;
        continue;
      }
      parts.unshift(body);
      have += body.length;
    }
    const all = Buffer.concat(parts);
    const cut = all.length > OUTPUT_TAIL_BYTES || evidence.length < mine.length + left.chunks;
    // Cut at a line start where one is near, so the tail opens with a whole line; a split character is dropped.
    let tail = new TextDecoder('utf-8').decode(all.subarray(Math.max(0, all.length - OUTPUT_TAIL_BYTES))).replace(/^\uFFFD+/, '');
    const newline = tail.indexOf('\n');
    if (all.length > OUTPUT_TAIL_BYTES && newline >= 0 && newline < 400) tail = tail.slice(newline + 1);
    streams.push({ stream, chunks: mine.length + left.chunks, bytes, tail, cut, missing, evidence: [evidence[0]!, evidence[evidence.length - 1]!].filter((v, i, a) => a.indexOf(v) === i) });
  }
  const [leftChunks, leftBytes] = Object.values(omitted).reduce(([c, b], o) => [c + o.chunks, b + o.bytes], [0, 0]);
  return { chunks: chunks.length + leftChunks, bytes: chunks.reduce((n, c) => n + c.data.chunk.size, leftBytes), streams };
}

/** A submission's grading or rejection, followed to the SubmissionReceived it names; nothing when it names none. */
function outcomeOf(seq: number | undefined, typeOf: (seq: number) => A2rlEvent['type'] | undefined, causes: ReadonlyMap<number, CauseReport>): Pick<SubmissionReport, 'outcome'> {
  const type = seq === undefined ? undefined : typeOf(seq);
  const causedBy = seq === undefined ? undefined : causes.get(seq);
  if (!causedBy || (type !== 'SubmissionGraded' && type !== 'SubmissionRejected')) return {};
  return { outcome: { seq: seq!, type, causedBy } };
}

/** Builds the structured report: pure given the analysis, the events and immutable blobs. */
export async function buildReport(input: ReportInput): Promise<RunReport> {
  const { analysis: a, events } = input;
  const at = clockOf(events);
  const seqsOf = (...types: A2rlEvent['type'][]) => events.filter((e) => types.includes(e.type)).map((e) => e.seq);
  const outcome = new Map<string, number>();
  for (const e of events) if (e.type === 'SubmissionGraded' || e.type === 'SubmissionRejected') outcome.set(e.data.submissionId, e.seq);
  const causes = causesOf(events);
  const eventAt = eventsBySeq(events);
  const typeOf = (seq: number) => eventAt(seq)?.type;
  const workspaceEvent = events.find((e) => e.type === 'WorkspacePrepared');
  const kinds = classifyProcesses(events); // the timeline's lanes and the training launches

  const submissions: SubmissionReport[] = [];
  let previous: SubmissionAnalysis | undefined;
  for (const s of a.submissions) {
    const rolloutSeqs = events
      .filter((e) => e.type === 'RolloutBatchRecorded' && e.seq < s.seq && (!previous || e.seq > previous.seq))
      .map((e) => e.seq);
    const files = await fileChanges(s.codeChanges, input.blobs);
    submissions.push({
      index: s.index,
      submissionId: s.submissionId,
      status: s.status,
      score: s.score,
      valid: s.valid,
      rejectedReason: s.rejectedReason,
      isCopyOfBase: s.isCopyOfBase,
      duplicateOf: s.duplicateOf,
      modelPath: s.modelPath,
      checkpointSha256: s.checkpointSha256,
      atS: s.atS,
      sincePreviousS: ms(s.atS - (previous?.atS ?? 0)),
      route: s.route,
      code: {
        files,
        linesAdded: files.reduce((n, f) => n + f.linesAdded, 0),
        linesRemoved: files.reduce((n, f) => n + f.linesRemoved, 0),
      },
      processes: processesOf(s, at, causes),
      rollouts: { ...s.rollouts, evidence: rolloutSeqs },
      evidence: sortedUnique([...s.evidence, s.seq, ...(outcome.has(s.submissionId) ? [outcome.get(s.submissionId)!] : [])]),
      ...outcomeOf(outcome.get(s.submissionId), typeOf, causes),
    });
    previous = s;
  }

  const integrity = workspaceIntegrity(events);
  const llm = a.llm ?? null; // rows analysed before model calls were recorded have none
  const limits = limitsOf(events, causes);
  const output = llm ? await outputOf(events, input.blobs, input.omittedOutput) : null;
  const bestId = bestSubmissionId(foldRunScores(events)); // the submission graded with the best score (the run-scores fold)
  const bestSubmission = bestId === undefined ? undefined : a.submissions.find((s) => s.submissionId === bestId);
  return {
    schema: 'a2rl.run-report/1',
    run: {
      runId: a.runId,
      task: a.task,
      level: input.level ?? null,
      agent: a.agent,
      driver: a.driver,
      ...(llm ? { declaredDriver: a.declaredDriver, driverMismatch: a.driverMismatch } : {}),
      baseModel: a.baseModel,
      mode: a.mode,
      budgetSeconds: a.budgetSeconds,
      state: a.state,
      scheduledAt: a.scheduledAt,
      durationS: a.durationS,
      exitReason: a.exitReason,
      sandbox: a.sandbox,
      workspace: workspaceEvent?.type === 'WorkspacePrepared' ? workspaceEvent.data.workspace : null,
      eventCount: a.eventCount,
      lastSeq: a.lastSeq,
      ...(a.interruptions ? { interruptions: a.interruptions } : {}),
      evidence: {
        scheduled: seqsOf('RunScheduled'),
        workspace: seqsOf('WorkspacePrepared'),
        lifecycle: seqsOf('AgentStarted', 'AgentExited', 'RunCompleted', 'RunInterrupted', 'RunResumed'),
      },
    },
    scores: {
      baseline: a.baseline,
      best: a.best,
      improvement: a.improvement,
      baselineEvidence: seqsOf('BaselineEvaluated'),
      bestEvidence: bestSubmission ? sortedUnique([bestSubmission.seq, ...(outcome.has(bestSubmission.submissionId) ? [outcome.get(bestSubmission.submissionId)!] : [])]) : [],
    },
    failure: a.failure,
    route: a.route,
    metrics: a.metrics,
    metricsEvidence: metricsEvidence(a, events, kinds.launches),
    submissions,
    timeline: timeline(input, at, kinds),
    ...(integrity ? { integrity } : {}),
    ...(llm ? { llm, transcript: reportTranscript(events) } : {}),
    ...(a.envCopy ? { envCopy: a.envCopy } : {}),
    ...(limits.length ? { limits } : {}),
    ...(output ? { output } : {}),
  };
}
