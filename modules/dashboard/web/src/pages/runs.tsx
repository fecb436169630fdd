import { useEffect, useMemo, useState } from 'preact/hooks';
import { getJson, qs, useJson, useLive } from '../api.js';
import { FilterBar, type Filter } from '../components/filter-bar.js';
import { StateBadge, FailureBadge } from '../components/badge.js';
import { Table, type Column, type SortState } from '../components/table.js';
import { duration, num, signed, when } from '../components/format.js';
import { link, setQuery, useLocation } from '../router.js';
import type { CampaignDetail, CampaignListItem, Page, RunSummary } from '../types.js';

const PAGE = 200; // GET /runs's largest page
const FILTERS = ['task', 'agent', 'driver', 'state', 'failure_class', 'campaign'] as const;
const STATES = ['scheduled', 'running', 'completed', 'interrupted', 'setup_failed', 'cancelled'];

/** Every run, read page by page (GET /runs pages at most 200). */
async function allRuns(): Promise<RunSummary[]> {
  const runs: RunSummary[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await getJson<Page<RunSummary>>(`/runs${qs({ limit: PAGE, offset })}`);
    runs.push(...page.items);
    if (page.items.length < PAGE || runs.length >= page.total) return runs;
  }
}

function durationOf(run: RunSummary): number | null {
  if (run.durationS !== undefined && run.durationS !== null) return run.durationS;
  return null;
}

const runHref = (run: RunSummary) => link(`/runs/${encodeURIComponent(run.runId)}`);

const COLUMNS: Column<RunSummary>[] = [
  {
    key: 'run',
    label: 'Run',
    sort: (r) => r.runId,
    render: (r) => (
      <a href={runHref(r)}>
        <code>{r.runId}</code>
      </a>
    ),
  },
  { key: 'task', label: 'Task', sort: (r) => r.task, render: (r) => r.task ?? '—' },
  { key: 'agent', label: 'Agent', sort: (r) => r.agent, render: (r) => r.agent ?? '—' },
  { key: 'driver', label: 'Driver', sort: (r) => r.driver, render: (r) => r.driver ?? '—' },
  { key: 'state', label: 'State', sort: (r) => (r.harnessGone ? 'interrupted' : r.state), render: (r) => <StateBadge state={r.state} harnessGone={r.harnessGone} outcome={r.outcome} testId={`run-state-${r.runId}`} /> },
  { key: 'baseline', label: 'Baseline', numeric: true, sort: (r) => r.baseline, render: (r) => num(r.baseline) },
  { key: 'best', label: 'Best', numeric: true, sort: (r) => r.best, render: (r) => num(r.best) },
  { key: 'improvement', label: 'Improvement', numeric: true, sort: (r) => r.improvement, render: (r) => signed(r.improvement) },
  { key: 'failure', label: 'Failure class', sort: (r) => r.failureClass, render: (r) => <FailureBadge failureClass={r.failureClass} /> },
  { key: 'started', label: 'Started', sort: (r) => r.scheduledAt, render: (r) => <time dateTime={r.scheduledAt ?? undefined}>{when(r.scheduledAt)}</time> },
  { key: 'duration', label: 'Duration', numeric: true, sort: (r) => durationOf(r), render: (r) => duration(durationOf(r)) },
];

function options(runs: readonly RunSummary[], pick: (r: RunSummary) => string | null | undefined) {
  return [...new Set(runs.map(pick).filter((v): v is string => !!v))].sort().map((value) => ({ value }));
}

/** The run ids of a campaign: every attempt's run of every cell. */
function campaignRuns(detail: CampaignDetail): Set<string> {
  const ids = new Set<string>();
  for (const cell of detail.cells) {
    if (cell.runId) ids.add(cell.runId);
    for (const id of (cell as { runs?: string[] }).runs ?? []) ids.add(id);
  }
  return ids;
}

/** The loaded list with what the live stream brought meanwhile (the newer of each run wins). */
function merge(loaded: RunSummary[], live: RunSummary[]): RunSummary[] {
  const byId = new Map(loaded.map((r) => [r.runId, r]));
  for (const r of live) {
    const old = byId.get(r.runId);
    if (!old || r.lastSeq >= old.lastSeq) byId.set(r.runId, r);
  }
  return [...byId.values()];
}

export function RunsPage() {
  const location = useLocation();
  const [runs, setRuns] = useState<RunSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const values = Object.fromEntries(FILTERS.map((f) => [f, location.query.get(f) ?? ''])) as Record<(typeof FILTERS)[number], string>;
  const campaigns = useJson<{ items: CampaignListItem[] }>('/campaigns');
  const campaign = useJson<CampaignDetail>(values.campaign ? `/campaigns/${encodeURIComponent(values.campaign)}` : null);

  useEffect(() => {
    allRuns().then(
      (loaded) => setRuns((live) => merge(loaded, live ?? [])),
      (err: unknown) => setError(err instanceof Error ? err.message : String(err)),
    );
  }, []);

  const live = useLive(
    () => '/live',
    {
      run: (data) => {
        const run = data as RunSummary;
        if (!run || typeof run.runId !== 'string') return;
        setRuns((current) => {
          const list = current ?? [];
          const at = list.findIndex((r) => r.runId === run.runId);
          if (at < 0) return [...list, run];
          const next = list.slice();
          next[at] = run;
          return next;
        });
      },
      campaign: (data) => {
        if (values.campaign && (data as { campaignId?: string })?.campaignId === values.campaign) campaign.reload();
      },
    },
    'runs',
  );

  const inCampaign = useMemo(() => (campaign.data ? campaignRuns(campaign.data) : null), [campaign.data]);
  const all = runs ?? [];
  const shown = useMemo(
    () =>
      all.filter(
        (r) =>
          (!values.task || r.task === values.task) &&
          (!values.agent || r.agent === values.agent) &&
          (!values.driver || r.driver === values.driver) &&
          (!values.state || (r.harnessGone ? 'interrupted' : r.state) === values.state) &&
          (!values.failure_class || r.failureClass === values.failure_class) &&
          (!values.campaign || r.campaignId === values.campaign || (inCampaign?.has(r.runId) ?? false)),
      ),
    [all, values.task, values.agent, values.driver, values.state, values.failure_class, values.campaign, inCampaign],
  );

  const filters: Filter[] = [
    { name: 'task', label: 'Task', options: options(all, (r) => r.task), value: values.task },
    { name: 'agent', label: 'Agent', options: options(all, (r) => r.agent), value: values.agent },
    { name: 'driver', label: 'Driver', options: options(all, (r) => r.driver), value: values.driver },
    { name: 'state', label: 'State', options: STATES.map((value) => ({ value, label: value.replace(/_/g, ' ') })), value: values.state },
    { name: 'failure_class', label: 'Failure class', options: options(all, (r) => r.failureClass), value: values.failure_class },
    { name: 'campaign', label: 'Campaign', options: (campaigns.data?.items ?? []).map((c) => ({ value: c.campaignId })), value: values.campaign },
  ];
  const sortKey = location.query.get('sort');
  const sort: SortState = sortKey ? { key: sortKey, dir: location.query.get('dir') === 'asc' ? 'asc' : 'desc' } : { key: 'started', dir: 'desc' };

  return (
    <section aria-labelledby="runs-title">
      <div class="page-head">
        <h1 id="runs-title">Runs</h1>
        <span class={`live-dot ${live ? 'on' : ''}`} role="status">
          {live ? 'live' : 'not live'}
        </span>
      </div>
      <FilterBar label="Filter runs" filters={filters} onChange={(name, value) => setQuery({ [name]: value })} />
      {error ? <p role="alert">Could not load the runs: {error}</p> : null}
      {runs === null && !error ? <p class="muted">Loading runs…</p> : null}
      {runs !== null ? (
        <Table
          caption={`${shown.length} of ${all.length} runs`}
          testId="runs-table"
          columns={COLUMNS}
          rows={shown}
          rowKey={(r) => r.runId}
          rowProps={(r) => ({ 'data-testid': `run-row-${r.runId}` })}
          sort={sort}
          onSort={(s) => setQuery({ sort: s.key, dir: s.dir })}
          empty={all.length ? 'No run matches the filters.' : 'No runs yet: start one with `a2rl run` or `a2rl demo`.'}
        />
      ) : null}
    </section>
  );
}
