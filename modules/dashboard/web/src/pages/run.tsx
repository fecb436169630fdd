import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useJson, useLive } from '../api.js';
import { FailureBadge, StateBadge } from '../components/badge.js';
import { SubmissionDiff } from '../components/diff-view.js';
import { EventDrawer } from '../components/event-drawer.js';
import { EventLink, eventHref, Proven } from '../components/event-link.js';
import { EventsList } from '../components/events-list.js';
import { clip, count, duration, num, signed, when } from '../components/format.js';
import { LineChart } from '../components/line-chart.js';
import { Table, type Column } from '../components/table.js';
import { TimelineChart } from '../components/timeline-chart.js';
import { OutputView } from '../components/output-view.js';
import { infraOutcome } from '../../../../../projections/run-analysis/outcome-badge.js';
import { TranscriptView } from '../components/transcript-view.js';
import { link, setQuery, useLocation } from '../router.js';
import type { LedgerEvent, LiveStatus, ProcessReport, RunAnalysis, RunReport, SubmissionAnalysis, SubmissionReport } from '../types.js';

/** Process rows drawn at most (a huge run keeps a responsive page). */
const MAX_PROCESS_ROWS = 500;
/** Live events kept in memory for the lists (the store has all of them). */
const TAIL = 500;
/** Events after which the analysis (header, submissions, chart) is worth reading again. */
const CHANGES_ANALYSIS = new Set(['LlmCallRecorded', 'RunScheduled', 'WorkspacePrepared', 'BaselineEvaluated', 'AgentStarted', 'SubmissionReceived', 'SubmissionGraded', 'SubmissionRejected', 'AgentExited', 'RunCompleted', 'RunInterrupted', 'RunResumed', 'LimitReached']);
const CHANGES_REPORT = new Set(['LlmCallRecorded', 'ProcessStarted', 'ProcessExited', 'LimitReached', 'SubmissionGraded', 'SubmissionRejected', 'AgentExited', 'RunCompleted', 'RunInterrupted']);

/** Calls `fn` at most once per `ms`, trailing. */
function useThrottled(fn: () => void, ms: number): () => void {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => () => clearTimeout(timer.current ?? undefined), []);
  return () => {
    if (timer.current) return;
    timer.current = setTimeout(() => {
      timer.current = null;
      latest.current();
    }, ms);
  };
}

/** Budget left, counted down between status updates while the run runs. */
function useBudgetLeft(status: LiveStatus | null): number | null {
  const [now, setNow] = useState(() => Date.now());
  const [at, setAt] = useState(() => Date.now());
  useEffect(() => setAt(Date.now()), [status]);
  const running = status?.state === 'running' && status.budgetLeftMs !== null;
  useEffect(() => {
    if (!running) return;
    const id = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(id);
  }, [running]);
  if (!status || status.budgetLeftMs === null) return null;
  return Math.max(0, status.budgetLeftMs - (running ? Math.max(0, now - at) : 0));
}

/** The run page; app.tsx keys it by run id, so another run starts from fresh state. */
export function RunPage({ runId }: { runId: string }) {
  const location = useLocation();
  const base = `/runs/${encodeURIComponent(runId)}`;
  const analysis = useJson<RunAnalysis>(base);
  // The report is built from every event of the run (seconds for a large one): asked for once the
  // header is shown, so that it never holds up the analysis or the first events page.
  const report = useJson<RunReport>(analysis.data ? `${base}/report?format=json` : null);
  const [status, setStatus] = useState<LiveStatus | null>(null);
  const [tail, setTail] = useState<LedgerEvent[]>([]);
  const [ended, setEnded] = useState(false);
  const lastSeq = useRef<number | null>(null);
  const refreshAnalysis = useThrottled(analysis.reload, 1500);
  const refreshReport = useThrottled(report.reload, 5000);

  const loadedSeq = useRef<number | null>(null);
  if (lastSeq.current === null && (analysis.data || analysis.error)) lastSeq.current = loadedSeq.current = analysis.data?.lastSeq ?? -1;

  // Live from the seq the analysis covers: the catch-up sends only what came after, never the whole run.
  const ready = analysis.data !== null || analysis.error !== null;
  const live = useLive(
    ready && !ended ? () => `${base}/live?after_seq=${lastSeq.current ?? -1}` : null,
    {
      event: (data) => {
        const e = data as LedgerEvent;
        if (!e || typeof e.seq !== 'number') return;
        if (lastSeq.current !== null && e.seq <= lastSeq.current) return; // already stored, or already here
        lastSeq.current = Math.max(lastSeq.current ?? -1, e.seq);
        setTail((current) => [...current.filter((t) => t.seq !== e.seq), e].slice(-TAIL));
        if (CHANGES_ANALYSIS.has(e.type)) refreshAnalysis();
        if (CHANGES_REPORT.has(e.type)) refreshReport();
      },
      status: (data) => setStatus(data as LiveStatus),
      end: () => {
        setEnded(true);
        // Read again only what the stream changed since the page loaded.
        if (lastSeq.current !== loadedSeq.current) {
          analysis.reload();
          report.reload();
        }
      },
    },
    `${runId}:${ready}`,
  );

  const seqParam = location.query.get('seq');
  const drawerSeq = seqParam !== null && /^\d+$/.test(seqParam) ? Number(seqParam) : null;
  const a = analysis.data;

  if (analysis.error && !a) {
    return (
      <section>
        <h1>Run {runId}</h1>
        <p role="alert">{analysis.error}</p>
        <p>
          <a href="#/runs">Back to the runs</a>
        </p>
        {drawerSeq !== null ? <EventDrawer runId={runId} seq={drawerSeq} onClose={() => setQuery({ seq: null })} /> : null}
      </section>
    );
  }

  return (
    <article class="run" aria-labelledby="run-title">
      <RunHeader runId={runId} analysis={a} status={status} live={live} ended={ended} report={report.data} />
      {a ? (
        <>
          <section aria-labelledby="scores-title">
            <h2 id="scores-title">Score trajectory</h2>
            <ScoreChart runId={runId} analysis={a} report={report.data} />
          </section>
          <section aria-labelledby="timeline-title">
            <h2 id="timeline-title">Timeline</h2>
            {report.data ? (
              <TimelineChart items={report.data.timeline.items} endS={timelineEnd(a, report.data)} eventHref={(seq) => eventHref(runId, seq)} testId="timeline-chart" />
            ) : (
              <ReportPending error={report.error} />
            )}
          </section>
          <section aria-labelledby="submissions-title">
            <h2 id="submissions-title">Submissions</h2>
            <Submissions runId={runId} analysis={a} report={report.data} reportError={report.error} />
          </section>
          <section aria-labelledby="processes-title">
            <h2 id="processes-title">Processes</h2>
            <Processes runId={runId} analysis={a} report={report.data} status={status} />
          </section>
          <section aria-labelledby="rollouts-title">
            <h2 id="rollouts-title">Rollouts</h2>
            <Rollouts runId={runId} analysis={a} report={report.data} />
          </section>
          <section aria-labelledby="agent-title">
            <h2 id="agent-title">What the agent did</h2>
            <AgentTabs runId={runId} analysis={a} tail={tail} tab={location.query.get('tab')} />
          </section>
        </>
      ) : (
        <p class="muted">Loading the run…</p>
      )}
      <section aria-labelledby="events-title">
        <h2 id="events-title">Events</h2>
        <EventsList runId={runId} liveTail={tail} label="The run's events" testId="events-list" />
      </section>
      {drawerSeq !== null ? <EventDrawer runId={runId} seq={drawerSeq} onClose={() => setQuery({ seq: null })} /> : null}
    </article>
  );
}

const AGENT_TABS = [
  { id: 'transcript', label: 'Transcript' },
  { id: 'output', label: 'Output' },
] as const;

/**
 * The agent's model calls (transcript) and its own stdout/stderr (output), one tab at a time; the
 * tab is in the address (`?tab=output`), so a link opens it. Default: the transcript of an
 * LLM-driven agent, the output of any other.
 */
function AgentTabs({ runId, analysis: a, tail, tab }: { runId: string; analysis: RunAnalysis; tail: LedgerEvent[]; tab: string | null }) {
  const chosen = tab === 'output' || tab === 'transcript' ? tab : a.llm || tail.some((e) => e.type === 'LlmCallRecorded') ? 'transcript' : 'output';
  return (
    <>
      <div class="tabs" role="tablist" aria-label="What the agent did">
        {AGENT_TABS.map((t) => (
          <button key={t.id} type="button" role="tab" id={`agent-tab-${t.id}`} aria-selected={t.id === chosen} aria-controls="agent-panel" data-testid={`tab-${t.id}`} onClick={() => setQuery({ tab: t.id })}>
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="agent-panel" aria-labelledby={`agent-tab-${chosen}`}>
        {chosen === 'transcript' ? <TranscriptView runId={runId} totals={a.llm?.totals ?? null} liveTail={tail} noModelCalls={noModelCalls(a)} /> : <OutputView runId={runId} liveTail={tail} />}
      </div>
    </>
  );
}

/** No model calls, now or later: no gateway (calls go through it), or none by the end of the run. */
function noModelCalls(a: RunAnalysis): boolean {
  return !a.llm || (a.llm.totals.calls === 0 && a.state !== 'running' && a.state !== 'scheduled');
}

/** The timeline spans the budget while the run runs, and what the run took once it has ended. */
function timelineEnd(a: RunAnalysis, report: RunReport): number {
  return a.state === 'running' || a.state === 'scheduled' || a.durationS === null ? report.timeline.endS : a.durationS;
}

function ReportPending({ error }: { error: string | null }) {
  return error ? <p role="alert">Could not load the run report: {error}</p> : <p class="muted">Loading the run report…</p>;
}

function RunHeader({ runId, analysis: a, status, live, ended, report }: { runId: string; analysis: RunAnalysis | null; status: LiveStatus | null; live: boolean; ended: boolean; report: RunReport | null }) {
  const budgetLeft = useBudgetLeft(status);
  const state = status?.state ?? a?.state ?? null;
  const submissions = status ? status.submissions : (a?.submissions.length ?? null);
  const best = status ? status.best : (a?.best ?? null);
  const baseline = status ? status.baseline : (a?.baseline ?? null);
  const bestSub = a?.submissions.find((s) => s.status === 'graded' && s.score === best);
  const base = `/runs/${encodeURIComponent(runId)}`;
  return (
    <header class="run-head">
      <div class="page-head">
        <h1 id="run-title">
          Run <code>{runId}</code>
        </h1>
        <StateBadge state={state} harnessGone={a?.harnessGone} outcome={a && state === a.state ? infraOutcome(a) : null} testId="run-state" />
        <span class={`live-dot ${live ? 'on' : ''}`} role="status">
          {live ? 'live' : ended || (state && state !== 'running' && state !== 'scheduled') ? 'ended' : 'not live'}
        </span>
      </div>
      <p class="muted">
        {a?.task ?? '—'} · {a?.agent ?? '—'} · {a?.driver ?? 'no driver'} · base {a?.baseModel ?? '—'} · scheduled {when(a?.scheduledAt)}
      </p>
      <nav aria-label="This run" class="run-links">
        <a href={link(`${base}/replay`)}>Replay</a>
        <a href={link(`${base}/audit`)}>Audit</a>
        <a href={`${base}/report?format=html`}>Report (HTML)</a>
      </nav>
      <dl class="stats">
        <div>
          <dt>Budget left</dt>
          <dd data-testid="budget-left">{budgetLeft !== null ? duration(budgetLeft / 1000) : a?.budgetSeconds ? <span class="muted">— of {duration(a.budgetSeconds)}</span> : '—'}</dd>
        </div>
        <div>
          <dt>Submissions</dt>
          <dd data-testid="submissions-count">
            {count(submissions)}
            {a?.pendingSubmissions ? <span class="muted"> (+{a.pendingSubmissions} grading)</span> : null}
          </dd>
        </div>
        <div>
          <dt>Best</dt>
          <dd data-testid="best">{bestSub ? <EventLink runId={runId} seq={bestSub.seq} label={`best ${num(best)}, event ${bestSub.seq}`}>{num(best)}</EventLink> : num(best)}</dd>
        </div>
        <div>
          <dt>Baseline</dt>
          <dd data-testid="baseline">
            <Proven runId={runId} seqs={report?.scores.baselineEvidence ?? []}>
              {num(baseline)}
            </Proven>
          </dd>
        </div>
        <div>
          <dt>Improvement</dt>
          <dd>{signed(a?.improvement)}</dd>
        </div>
        <div>
          <dt>Failure class</dt>
          <dd>
            {a && a.state && a.state !== 'running' && a.state !== 'scheduled' ? (
              <Proven runId={runId} seqs={a.failure.evidence}>
                <FailureBadge failureClass={a.failure.class} />
              </Proven>
            ) : (
              <span class="muted">when it ends</span>
            )}
          </dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd>{duration(a?.durationS)}</dd>
        </div>
        {a?.interruptions ? (
          <div data-testid="run-interruptions">
            <dt>Interruptions</dt>
            <dd>
              <Proven runId={runId} seqs={a.interruptions.list.flatMap((i) => (i.resumedSeq === null ? [i.interruptedSeq] : [i.interruptedSeq, i.resumedSeq]))}>
                harness lost {a.interruptions.count}×, resumed {a.interruptions.resumed}×; down {duration(a.interruptions.downtimeS)}
              </Proven>
            </dd>
          </div>
        ) : null}
        <div>
          <dt>Events</dt>
          <dd>{count(a ? Math.max(a.eventCount, (a.lastSeq ?? -1) + 1) : null)}</dd>
        </div>
      </dl>
      {report?.limits?.length ? (
        <div class="limits" role="note" data-testid="run-limits">
          <h2 class="small">Limits reached</h2>
          <ul>
            {report.limits.map((l) => (
              <li key={l.seq}>
                <EventLink runId={runId} seq={l.seq} label={`${l.limit} reached, event ${l.seq}`}>
                  {l.limit}
                </EventLink>{' '}
                {count(l.value)} of {count(l.max)}
                {l.over > 0 ? <strong class="overrun"> — over by {count(l.over)}</strong> : null} · {l.action}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {status && status.processes.length ? (
        <div class="current-processes">
          <h2 class="small">Running now</h2>
          <ul>
            {status.processes.map((p) => (
              <li key={p.pid}>
                <EventLink runId={runId} seq={p.startedSeq} label={`process ${p.pid}, event ${p.startedSeq}`}>
                  pid {p.pid}
                </EventLink>{' '}
                <code>{clip(p.command, 160)}</code>
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </header>
  );
}

function ScoreChart({ runId, analysis: a, report }: { runId: string; analysis: RunAnalysis; report: RunReport | null }) {
  const graded = a.submissions.filter((s) => s.status === 'graded');
  const rejected = a.submissions.length - graded.length;
  const points = graded.map((s) => ({ x: s.atS, y: s.score, label: `submission ${s.index}: score ${num(s.score)} at ${duration(s.atS)}`, href: eventHref(runId, s.seq) }));
  const baselineSeq = report?.scores.baselineEvidence[0];
  const references = a.baseline !== null ? [{ y: a.baseline, label: `baseline ${num(a.baseline)}`, href: baselineSeq !== undefined ? eventHref(runId, baselineSeq) : undefined }] : [];
  if (!points.length) {
    return (
      <p class="muted" data-testid="score-chart-empty">
        No graded submission yet{rejected ? ` (${rejected} rejected)` : ''}.
        {a.baseline !== null ? ` Baseline ${num(a.baseline)}.` : ''}
      </p>
    );
  }
  return (
    <>
      <LineChart title={`Score of each graded submission over time${a.baseline !== null ? ', with the baseline' : ''}`} points={points} references={references} xLabel="time since the agent started" yLabel="score" formatX={duration} testId="score-chart" />
      {rejected ? <p class="muted">{rejected} rejected submissions are not plotted.</p> : null}
    </>
  );
}

function Submissions({ runId, analysis: a, report, reportError }: { runId: string; analysis: RunAnalysis; report: RunReport | null; reportError: string | null }) {
  const byIndex = useMemo(() => new Map((report?.submissions ?? []).map((s) => [s.index, s])), [report]);
  const columns: Column<SubmissionAnalysis>[] = [
    { key: 'index', label: '#', numeric: true, sort: (s) => s.index, render: (s) => s.index },
    { key: 'id', label: 'Submission', sort: (s) => s.submissionId, render: (s) => <EventLink runId={runId} seq={s.seq} label={`${s.submissionId}, event ${s.seq}`}>{s.submissionId}</EventLink> },
    { key: 'at', label: 'At', numeric: true, sort: (s) => s.atS, render: (s) => duration(s.atS) },
    { key: 'status', label: 'Grading', sort: (s) => s.status, render: (s) => (s.status === 'graded' ? 'graded' : <span title={s.rejectedReason ?? undefined}>rejected: {s.rejectedReason ?? '—'}</span>) },
    {
      key: 'score',
      label: 'Score',
      numeric: true,
      sort: (s) => (s.status === 'graded' ? s.score : null),
      render: (s) => (s.status === 'graded' ? <Proven runId={runId} seqs={byIndex.get(s.index)?.evidence.filter((q) => q !== s.seq) ?? []}>{num(s.score)}</Proven> : '—'),
    },
    { key: 'valid', label: 'Valid', sort: (s) => (s.valid ? 1 : 0), render: (s) => (s.valid ? 'yes' : 'no') + (s.isCopyOfBase ? ' (copy of base)' : '') },
    { key: 'code', label: 'Code changes', numeric: true, sort: (s) => s.codeChanges.length, render: (s) => codeSummary(s) },
    { key: 'processes', label: 'Processes', numeric: true, sort: (s) => s.processes.length, render: (s) => s.processes.length },
  ];
  if (!a.submissions.length) return <p class="muted">No submissions yet{a.pendingSubmissions ? ` (${a.pendingSubmissions} being graded)` : ''}.</p>;
  return (
    <>
      <Table caption="Submissions and their gradings" columns={columns} rows={a.submissions} rowKey={(s) => s.submissionId} testId="submissions-table" />
      <h3>Code diffs</h3>
      {report ? (
        report.submissions.map((s: SubmissionReport) => <SubmissionDiff key={s.index} runId={runId} index={s.index} files={s.code.files} linesAdded={s.code.linesAdded} linesRemoved={s.code.linesRemoved} />)
      ) : (
        <ReportPending error={reportError} />
      )}
    </>
  );
}

function codeSummary(s: SubmissionAnalysis): string {
  const added = s.codeChanges.reduce((n, c) => n + c.linesAdded, 0);
  const removed = s.codeChanges.reduce((n, c) => n + c.linesRemoved, 0);
  const files = new Set(s.codeChanges.map((c) => c.path)).size;
  return files ? `${files} files +${added} −${removed}` : '—';
}

interface ProcessRow {
  pid: number;
  command: string;
  kind: string;
  startS: number | null;
  durationS: number | null;
  exit: string;
  seqs: number[];
  /** The seq of the model call whose tool call started it, when the report names one. */
  startedBy?: number;
}

function Processes({ runId, analysis: a, report, status }: { runId: string; analysis: RunAnalysis; report: RunReport | null; status: LiveStatus | null }) {
  const rows = useMemo<ProcessRow[]>(() => {
    const exit = (p: { exitCode: number | null; signal: string | null; durationS: number | null }) => (p.signal ? `signal ${p.signal}` : p.exitCode !== null ? `exit ${p.exitCode}` : p.durationS === null ? 'running' : '—');
    if (report) {
      const known = new Map<number, ProcessRow>();
      for (const p of report.submissions.flatMap((s): ProcessReport[] => s.processes)) {
        known.set(p.evidence[0]!, { pid: p.pid, command: p.argv.join(' '), kind: p.kind, startS: p.startS, durationS: p.durationS, exit: exit(p), seqs: p.evidence, ...(p.startedBy ? { startedBy: p.startedBy.seq } : {}) });
      }
      // Processes after the last submission are only on the timeline.
      for (const item of report.timeline.items) {
        if (['files', 'rollouts', 'submissions', 'model-calls'].includes(item.lane) || known.has(item.seq)) continue;
        known.set(item.seq, { pid: NaN, command: item.label, kind: item.lane, startS: item.startS, durationS: item.endS === null ? null : item.endS - item.startS, exit: item.endS === null ? 'running or unknown' : '—', seqs: [item.seq] });
      }
      return [...known.values()].sort((x, y) => x.seqs[0]! - y.seqs[0]!);
    }
    return a.submissions.flatMap((s) => s.processes).map((p) => ({ pid: p.pid, command: p.argv.join(' '), kind: p.kind, startS: null, durationS: p.durationS, exit: exit(p), seqs: p.exitSeq === null ? [p.startSeq] : [p.startSeq, p.exitSeq] }));
  }, [a, report]);
  const running = new Set((status?.processes ?? []).map((p) => p.startedSeq));
  const columns: Column<ProcessRow>[] = [
    { key: 'start', label: 'Started', numeric: true, sort: (p) => p.seqs[0], render: (p) => <EventLink runId={runId} seq={p.seqs[0]!} label={`started, event ${p.seqs[0]}`}>{p.startS === null ? `#${p.seqs[0]}` : duration(p.startS)}</EventLink> },
    { key: 'kind', label: 'Classification', sort: (p) => p.kind, render: (p) => <span class="badge tone-neutral">{p.kind}</span> },
    { key: 'command', label: 'Command', sort: (p) => p.command, render: (p) => (
        <>
          <code title={p.command}>{clip(p.command, 120)}</code>
          {p.startedBy !== undefined ? (
            <>
              {' '}
              <EventLink runId={runId} seq={p.startedBy} label={`started by the model call of event ${p.startedBy}`}>{`← model call #${p.startedBy}`}</EventLink>
            </>
          ) : null}
        </>
      ) },
    { key: 'duration', label: 'Duration', numeric: true, sort: (p) => p.durationS, render: (p) => (running.has(p.seqs[0]!) ? 'running' : duration(p.durationS)) },
    { key: 'exit', label: 'Exit', sort: (p) => p.exit, render: (p) => (p.seqs[1] !== undefined ? <EventLink runId={runId} seq={p.seqs[1]} label={`${p.exit}, event ${p.seqs[1]}`}>{p.exit}</EventLink> : p.exit) },
  ];
  const shown = rows.length > MAX_PROCESS_ROWS ? rows.slice(0, MAX_PROCESS_ROWS) : rows;
  return (
    <>
      <Table caption="Processes the agent launched, classified" columns={columns} rows={shown} rowKey={(p) => String(p.seqs[0])} testId="processes-table" empty="No processes recorded." />
      {shown.length < rows.length ? <p class="muted">The first {MAX_PROCESS_ROWS} of {rows.length} processes; the events list has every one.</p> : null}
    </>
  );
}

function Rollouts({ runId, analysis: a, report }: { runId: string; analysis: RunAnalysis; report: RunReport | null }) {
  const rows = a.submissions.filter((s) => s.rollouts.batches > 0);
  const batches = report?.timeline.items.filter((i) => i.lane === 'rollouts') ?? [];
  const after = batches.filter((b) => !a.submissions.length || b.seq > a.submissions[a.submissions.length - 1]!.seq);
  if (!rows.length && !batches.length) return <p class="muted">No rollouts recorded ({count(a.metrics.rollout_episodes)} episodes).</p>;
  const byIndex = new Map((report?.submissions ?? []).map((s) => [s.index, s.rollouts.evidence]));
  const columns: Column<SubmissionAnalysis>[] = [
    { key: 'before', label: 'Before submission', numeric: true, sort: (s) => s.index, render: (s) => s.index },
    { key: 'batches', label: 'Batches', numeric: true, sort: (s) => s.rollouts.batches, render: (s) => <Proven runId={runId} seqs={byIndex.get(s.index) ?? []}>{s.rollouts.batches}</Proven> },
    { key: 'episodes', label: 'Episodes', numeric: true, sort: (s) => s.rollouts.episodes, render: (s) => count(s.rollouts.episodes) },
    { key: 'steps', label: 'Steps', numeric: true, sort: (s) => s.rollouts.steps, render: (s) => count(s.rollouts.steps) },
    { key: 'success', label: 'Success rate', numeric: true, sort: (s) => s.rollouts.successRate, render: (s) => num(s.rollouts.successRate, 3) },
  ];
  return (
    <>
      {rows.length ? <Table caption="Rollouts between submissions" columns={columns} rows={rows} rowKey={(s) => s.submissionId} testId="rollouts-table" /> : null}
      {after.length ? (
        <p>
          After the last submission:{' '}
          {after.slice(0, 20).map((b) => (
            <span key={b.seq}>
              <EventLink runId={runId} seq={b.seq} label={`${b.label}, event ${b.seq}`}>
                {b.label}
              </EventLink>
              {'; '}
            </span>
          ))}
          {after.length > 20 ? `and ${after.length - 20} more batches.` : ''}
        </p>
      ) : null}
    </>
  );
}
