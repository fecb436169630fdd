import type { A2rlEvent, EventType } from '../ledger/events/catalog.js';
import { programKind } from '../../projections/run-analysis/process-kind.js';
import { improvementOf, integrityOk, limitAction } from '../../projections/derived-facts.js';

/** One line of the step-through listing. */
export interface TimelineEntry {
  seq: number;
  occurredAt: string;
  type: EventType;
  summary: string;
}

const MAX_SUMMARY = 100;

/** Shortens to MAX_SUMMARY characters with an ellipsis. */
function clip(text: string, width = MAX_SUMMARY): string {
  return text.length > width ? `${text.slice(0, width - 1)}…` : text;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(1)} GiB`;
}

const score = (n: number) => String(Math.round(n * 100) / 100);
const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const signed = (n: number) => `${n >= 0 ? '+' : '−'}${score(Math.abs(n))}`;

/** The run so far, for values newer events leave to readers (an improvement, the best score). */
interface SoFar {
  baseline: number | null;
  best: number | null;
}

type Summarize<D> = (data: D, ws: (text: string) => string, sizeBefore: (path: string) => number | undefined, run: SoFar) => string;
type Summaries = { [T in EventType]: Summarize<Extract<A2rlEvent, { type: T }>['data']> };

/**
 * A file change as its size change. The listing reads no blobs (it is the ledger alone, one line per
 * event), so line counts, which need both contents, are left to `--diff` and reports.
 */
function sizeChange(d: Extract<A2rlEvent, { type: 'FileChanged' }>['data'], before: number | undefined): string {
  const delta = (n: number) => `${n < 0 ? '−' : '+'}${formatBytes(Math.abs(n))}`;
  if (d.op === 'delete') return before === undefined ? '' : ` (${delta(-before)})`;
  if (d.size === undefined) return '';
  return before === undefined || d.op === 'create' ? ` (${formatBytes(d.size)})` : ` (${formatBytes(d.size)}, ${delta(d.size - before)})`;
}

/**
 * One summary per event type (a missing type is a compile error). `ws` shortens workspace paths;
 * `sizeBefore` is a workspace path's size before the event, when the ledger says.
 */
const SUMMARIES: Summaries = {
  RunScheduled: (d) => `${d.task} by ${d.agent}${d.driver ? ` (${d.driver})` : ''}, base ${d.baseModel}, budget ${d.budgetSeconds}s, seed ${d.seed}, mode ${d.mode}`,
  WorkspacePrepared: (d) => `sandbox ${d.sandbox}, ${d.dataManifest.length} files provided (${formatBytes(d.dataManifest.reduce((n, f) => n + f.size, 0))})`,
  BaselineEvaluated: (d) => `baseline ${score(d.score)}${d.cached ? ' (cached)' : ''}`,
  WorkspaceIntegrityChecked: (d) =>
    `${d.phase === 'end' ? 'end of run' : d.phase === 'resume' ? 'on resume' : `before grading${d.submissionId ? ` ${d.submissionId}` : ''}`} (${d.full ? 'hashed' : 'stat'}): ${d.checked} paths, ${integrityOk(d) ? 'data/ and models/ unchanged' : `${d.differences.length + (d.moreDifferences ?? 0)} differences`}`,
  AgentStarted: (d, ws) => `${ws(d.command)}${d.pid === undefined ? '' : ` (pid ${d.pid})`}`,
  FileChanged: (d, _ws, sizeBefore) => `${d.op} ${d.path}${sizeChange(d, sizeBefore(d.path))}`,
  // The program's own kind (one event at a time; reports add the process tree's context).
  ProcessStarted: (d, ws) => `pid ${d.pid} ${programKind(d)}: ${ws(d.argv.join(' '))}`,
  ProcessExited: (d) => {
    const how = d.exitCode !== undefined ? `exit ${d.exitCode}` : d.signal ? `signal ${d.signal}` : 'exited';
    return `pid ${d.pid} ${how} after ${(d.durationMs / 1000).toFixed(2)} s`;
  },
  RolloutBatchRecorded: (d) => `${d.env}: ${d.episodes} episodes, ${d.steps} steps, success ${d.successRate.toFixed(2)}, mean return ${score(d.meanReturn)}`,
  SubmissionReceived: (d) => `${d.submissionId} ${d.modelPath} (${d.manifest.length} files, ${formatBytes(d.manifest.reduce((n, f) => n + f.size, 0))})`,
  SubmissionGraded: (d, _ws, _size, run) => {
    const duplicateOf = d.details?.duplicateOf;
    const improvement = improvementOf(d, run.baseline);
    return `${d.submissionId} score ${score(d.score)} (${improvement === null ? 'no baseline' : signed(improvement)})${typeof duplicateOf === 'string' ? `, same content as ${duplicateOf}` : ''}`;
  },
  SubmissionRejected: (d) => `${d.submissionId} ${d.reasonClass}: ${d.message}`,
  AgentOutput: (d) => `${d.stream} ${formatBytes(d.chunk.size)}`,
  SecretRedacted: (d) => `${d.count} × ${d.kind} redacted in ${d.where === 'blob' ? `${d.blob ?? 'other'} blob${d.path ? ` ${d.path}` : ''}` : 'event'}${d.eventType ? ` of ${d.eventType}` : ''}${d.field ? ` at ${d.field}` : ''}`,
  AgentExited: (d) => `${d.reason}${d.exitCode !== undefined ? `, exit ${d.exitCode}` : ''}${d.signal ? `, signal ${d.signal}` : ''}`,
  RunCompleted: (d, _ws, _size, run) => {
    const best = d.best ?? run.best;
    return `${d.submissions} submissions, best ${best === null ? '-' : score(best)}`;
  },
  RunInterrupted: (d) => d.reason,
  RunResumed: (d) => d.note ?? '',
  TreeHeadSigned: (d) => `tree size ${d.treeSize}, root ${d.rootHash.slice(0, 16)}…, key ${d.keyId}`,
  TransientFileRecorded: (d) => `transient ${d.path}${d.size !== undefined ? ` (${formatBytes(d.size)})` : ''}${d.key ? '' : `: ${d.note ?? 'content not read'}`}`,
  ObservationGap: (d) => `${d.observer} observation gap${d.count !== undefined ? ` (${d.count} lost)` : ''}: ${d.reason}`,
  EgressConnection: (d) =>
    `${d.method} ${d.host}:${d.port} ${d.allowed ? `allowed, ${formatBytes(d.bytesOut)} out, ${formatBytes(d.bytesIn)} in` : 'refused'}${d.reason ? `: ${d.reason}` : ''}`,
  LlmCallRecorded: (d) =>
    `${d.callId} ${d.provider} ${d.api} ${d.modelAnswered ?? d.modelRequested ?? '?'} → ${d.status} ${d.outcome}, ${d.usage.inputTokens ?? '?'} in / ${d.usage.outputTokens ?? '?'} out${d.toolCalls.length ? `, tools ${d.toolCalls.map((t) => t.name).join(', ')}` : ''}`,
  AgentHomeArchived: (d) =>
    `${d.files.length + (d.chunked?.length ?? 0)} ${d.changedOnly ? 'changed ' : ''}files of the agent's home archived${d.removed?.length ? `, ${d.removed.length} gone` : ''}${d.skipped ? `, ${d.skipped} skipped` : ''}`,
  GradingRepeated: (d) =>
    `${d.subject === 'baseline' ? 'baseline' : `submission ${d.submissionId}`} graded again (${d.repeat}/${d.of})${d.score !== undefined ? `: ${score(d.score)}` : `, failed: ${d.error ?? 'unknown error'}`}`,
  LimitReached: (d) => `${d.limit} reached${d.scope ? ` (${d.scope})` : ''}: ${d.value} of ${d.max}; ${limitAction(d)}`,
  // Campaign streams (a campaign's timeline lists them the same way).
  CampaignScheduled: (d) => {
    const { tasks, agents, drivers, seeds } = d.matrix;
    const matrix = [count(tasks.length, 'task'), count(agents.length, 'agent'), ...(drivers.length ? [count(drivers.length, 'driver')] : []), count(seeds, 'seed')];
    const options = [`budget ${d.budgetSeconds}s`, count(d.retries, 'retry', 'retries'), `${d.queue} queue`, ...(d.concurrency ? [`concurrency ${d.concurrency}`] : []), ...(d.regradeBaseline ? ['baseline regraded'] : []), ...(d.baselineRepeats ? [`baseline graded ${d.baselineRepeats}×`] : [])];
    return `${count(d.cells.length, 'cell')}: ${matrix.join(' × ')}, ${options.join(', ')}`;
  },
  RunRequested: (d) => `cell ${d.cell} attempt ${d.attempt} queued`,
  RunAssigned: (d) => `cell ${d.cell} attempt ${d.attempt}: run ${d.runId} on ${d.worker.id}${d.gpus.length ? ` (GPUs ${d.gpus.join(',')})` : ''}`,
  RunFinished: (d) =>
    `cell ${d.cell} attempt ${d.attempt} ${d.outcome}${d.runId ? ` (run ${d.runId})` : ''}${d.best !== undefined ? `, best ${score(d.best)}` : ''}${d.reason ? `: ${d.reason}` : ''}`,
  RunRetried: (d) => `cell ${d.cell} ${d.handedBack ? 'handed back' : 'retried'} as attempt ${d.attempt}: ${d.reason}`,
  CampaignCompleted: (d) => `${d.completed} completed, ${d.failed} failed`,
  CampaignCancelled: (d) => d.reason ?? 'cancelled',
  // The access stream (`a2rl access` lists it the same way).
  TokenCreated: (d) => `token ${d.tokenId} "${d.name}" (${d.role})${d.expiresAt ? `, expires ${d.expiresAt}` : ''}`,
  TokenRevoked: (d) => `token ${d.tokenId} revoked`,
  AccessRecorded: (d) => {
    const target = d.target?.runId ? ` run ${d.target.runId}` : d.target?.campaignId ? ` campaign ${d.target.campaignId}` : '';
    const verified = d.verified === undefined ? '' : d.verified ? ' (verified)' : ' (verification failed)';
    return `${d.actor.kind} ${d.actor.name}${d.actor.role ? ` (${d.actor.role})` : ''} ${d.action}${target}: ${d.outcome}${verified}${d.detail ? `: ${d.detail}` : ''}`;
  },
};

/**
 * The step-through listing of a run: seq, time, type and a one-line summary per event. Absolute
 * paths inside the run's workspace (known from WorkspacePrepared) are shown workspace-relative.
 */
export function timelineOf(events: Iterable<A2rlEvent>): TimelineEntry[] {
  let workspace: string | null = null;
  const ws = (text: string) => (workspace ? text.split(`${workspace}/`).join('') : text);
  const sizes = new Map<string, number>(); // workspace path → its size after the events so far
  const out: TimelineEntry[] = [];
  const run: SoFar = { baseline: null, best: null };
  for (const event of events) {
    if (event.type === 'WorkspacePrepared') workspace = event.data.workspace.replace(/\/+$/, '');
    const summarize = SUMMARIES[event.type] as Summarize<unknown>;
    out.push({ seq: event.seq, occurredAt: event.occurredAt, type: event.type, summary: clip(summarize(event.data, ws, (p) => sizes.get(p), run).replace(/\s+/g, ' ')) });
    if (event.type === 'BaselineEvaluated') run.baseline = event.data.score;
    if (event.type === 'SubmissionGraded') run.best = Math.max(run.best ?? event.data.score, event.data.score);
    if (event.type === 'WorkspacePrepared') for (const f of event.data.dataManifest) sizes.set(f.path, f.size);
    if (event.type === 'FileChanged') {
      if (event.data.op === 'delete' || event.data.size === undefined) sizes.delete(event.data.path);
      else sizes.set(event.data.path, event.data.size);
    }
  }
  return out;
}
