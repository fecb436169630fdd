import { createHash } from 'node:crypto';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { EVENTS, LLM_USAGE, RUNS, SUBMISSIONS, type Cell, type TableData } from './table-schemas.js';

// The built-in tables as rows, from the run analyses (read models) and the ledger's run events.
// Pure: the same analyses and events give the same rows, in the same order (run id, then seq).

/** What RunScheduled says that the analysis does not keep: the seed and the campaign job. */
export interface ScheduledFacts {
  seed: number;
  campaign: { id: string; cell: number; attempt: number } | null;
}

/** Collects the flat events table and each run's scheduling facts in one pass over the ledger. */
export class EventRows {
  readonly rows: Cell[][] = [];
  readonly scheduled = new Map<string, ScheduledFacts>();

  constructor(private readonly keep: (runId: string) => boolean = () => true) {}

  add(recorded: Pick<RecordedEvent, 'event' | 'bytes'>): void {
    const e = recorded.event;
    if (!this.keep(e.runId)) return;
    if (e.type === 'RunScheduled') {
      const d = (e as Extract<A2rlEvent, { type: 'RunScheduled' }>).data;
      this.scheduled.set(e.runId, { seed: d.seed, campaign: d.campaign ? { ...d.campaign } : null });
    }
    const sha = createHash('sha256').update(recorded.bytes).digest('hex');
    this.rows.push([e.runId, e.seq, e.id, e.type, e.occurredAt, e.schemaVersion, sha, canonicalJson(e.data)]);
  }

  table(): TableData {
    const rows = [...this.rows].sort((a, b) => byText(a[0] as string, b[0] as string) || (a[1] as number) - (b[1] as number));
    return { spec: EVENTS, rows };
  }
}

const byText = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

/** runs, submissions and llm_usage from the analyses (ordered by run id), with RunScheduled's facts. */
export function analysisTables(analyses: readonly RunAnalysis[], scheduled: ReadonlyMap<string, ScheduledFacts>): TableData[] {
  const sorted = [...analyses].sort((a, b) => byText(a.runId, b.runId));
  const runs: Cell[][] = [];
  const submissions: Cell[][] = [];
  const usage: Cell[][] = [];
  for (const a of sorted) {
    const s = scheduled.get(a.runId);
    const t = a.llm?.totals;
    runs.push([
      a.runId, a.task, a.agent, a.driver, a.declaredDriver, a.baseModel, a.mode, s ? BigInt(s.seed) : null, a.budgetSeconds === null ? null : BigInt(a.budgetSeconds),
      s?.campaign?.id ?? null, s?.campaign?.cell ?? null, s?.campaign?.attempt ?? null,
      a.state, a.scheduledAt, a.durationS, a.exitReason, a.sandbox,
      a.baseline, a.baselineCached, a.best, a.improvement,
      // The class only once the run has ended, as every listing shows it (failureClassOf).
      failureClassOf(a), failureClassOf(a) === null ? null : a.failure.rule, a.route.best, a.route.declared,
      a.submissions.length, a.metrics.valid_submission_rate, a.metrics.training_launches, a.metrics.total_training_time,
      BigInt(a.metrics.rollout_episodes), a.metrics.copy_model_count,
      t ? t.calls : null, t ? BigInt(t.inputTokens) : null, t ? BigInt(t.outputTokens) : null, t ? t.costUsd : null,
      a.eventCount, a.lastSeq,
    ]);
    for (const sub of a.submissions) {
      submissions.push([
        a.runId, sub.index, sub.submissionId, sub.seq, sub.atS, sub.status, sub.score, sub.rejectedReason, sub.valid, sub.isCopyOfBase,
        sub.route.declared, sub.route.executed, sub.checkpointSha256, sub.codeChanges.length, sub.processes.length,
      ]);
    }
    for (const m of a.llm?.models ?? []) {
      usage.push([
        a.runId, m.model, m.calls, m.billableCalls, m.turns, BigInt(m.inputTokens), BigInt(m.outputTokens), BigInt(m.cacheReadTokens), BigInt(m.cacheWriteTokens),
        m.costUsd, m.callsWithoutCost,
      ]);
    }
  }
  return [
    { spec: RUNS, rows: runs },
    { spec: SUBMISSIONS, rows: submissions },
    { spec: LLM_USAGE, rows: usage },
  ];
}
