import { qs, useJson } from '../api.js';
import { FilterBar } from '../components/filter-bar.js';
import { FailureFigure, ImprovementFigure } from '../components/scoreboard-figures.js';
import { interval, num, signed } from '../components/format.js';
import { Table, type Column } from '../components/table.js';
import { link, setQuery, useLocation } from '../router.js';
import type { CampaignListItem, ScoreboardRow } from '../types.js';

function Distinguishable({ value, caveat }: { value: boolean | null; caveat?: string }) {
  // A zero-width interval (identical scores) gets no verdict: the row says why instead.
  if (value === null && caveat) return <span class="badge tone-warn" title={caveat}>no verdict: {caveat}</span>;
  if (value === null) return <span class="muted" title="no noise floor, or no scored run">n/a</span>;
  return value ? <span class="badge tone-good">clear of noise</span> : <span class="badge tone-warn">within noise</span>;
}

const rowKey = (r: ScoreboardRow) => JSON.stringify([r.task, r.agent, r.driver]);

const COLUMNS: Column<ScoreboardRow>[] = [
  { key: 'task', label: 'Task', sort: (r) => r.task, render: (r) => r.task ?? '—' },
  { key: 'agent', label: 'Agent', sort: (r) => r.agent, render: (r) => r.agent ?? '—' },
  { key: 'driver', label: 'Driver', sort: (r) => r.driver, render: (r) => r.driver ?? '—' },
  { key: 'n', label: 'n', numeric: true, sort: (r) => r.n, render: (r) => (r.unscoredRuns ? <span title={`${r.unscoredRuns} unscored runs`}>{r.n} of {r.runs}</span> : r.n) },
  { key: 'mean', label: 'Mean best', numeric: true, sort: (r) => r.best.mean, render: (r) => num(r.best.mean) },
  { key: 'ci', label: '95% interval', sort: (r) => r.best.ci95?.[0], render: (r) => interval(r.best.ci95) },
  { key: 'baseline', label: 'Baseline', numeric: true, sort: (r) => r.baseline, render: (r) => num(r.baseline) },
  { key: 'improvement', label: 'Improvement', numeric: true, sort: (r) => r.improvement, render: (r) => signed(r.improvement) },
  {
    key: 'floor',
    label: 'Noise floor',
    sort: (r) => r.noiseFloor?.mean,
    render: (r) => (r.noiseFloor ? `${num(r.noiseFloor.mean)} ${interval(r.noiseFloor.ci95)} (n=${r.noiseFloor.n})` : <span class="muted">—</span>),
  },
  {
    key: 'noise',
    label: 'Grading sd',
    numeric: true,
    sort: (r) => r.evaluationNoise?.std,
    render: (r) => (r.evaluationNoise ? <span title={`${r.evaluationNoise.gradings} gradings of ${r.evaluationNoise.checkpoints} checkpoints`}>{num(r.evaluationNoise.std, 3)}</span> : <span class="muted">—</span>),
  },
  { key: 'distinguishable', label: 'Distinguishable', sort: (r) => (r.distinguishable === null ? null : r.distinguishable ? 1 : 0), render: (r) => <Distinguishable value={r.distinguishable} caveat={r.caveat} /> },
  {
    key: 'runs',
    label: 'Runs',
    render: (r) => (
      <a href={link('/runs', { task: r.task, agent: r.agent, driver: r.driver })} aria-label={`${r.runs} runs of ${r.task ?? 'no task'}, ${r.agent ?? 'no agent'}, ${r.driver ?? 'no driver'}`}>
        {r.runs} run{r.runs === 1 ? '' : 's'}
      </a>
    ),
  },
];

export function ScoreboardPage() {
  const location = useLocation();
  const campaign = location.query.get('campaign') ?? '';
  const campaigns = useJson<{ items: CampaignListItem[] }>('/campaigns');
  const board = useJson<ScoreboardRow[]>(`/scoreboard${qs({ format: 'json', campaign })}`);
  return (
    <section aria-labelledby="scoreboard-title">
      <h1 id="scoreboard-title">Scoreboard{campaign ? ` · campaign ${campaign}` : ''}</h1>
      <p class="muted">
        Best-of-budget score per task × agent × driver: mean over scored runs with its Student-t 95% interval. The noise floor is what grading the unchanged base model
        again gives; a row whose interval overlaps it is not distinguishable from noise, and one whose interval has zero width (identical scores) gets no verdict.
        LLM-driven runs that tested the infrastructure (their model never answered, the harness failed) are left out.
      </p>
      <FilterBar
        label="Scoreboard scope"
        filters={[{ name: 'campaign', label: 'Campaign', options: (campaigns.data?.items ?? []).map((c) => ({ value: c.campaignId })), value: campaign }]}
        onChange={(name, value) => setQuery({ [name]: value })}
      />
      {board.error ? (
        <p role="alert">
          {campaign && /campaign/.test(board.error) ? 'This server cannot scope the scoreboard to a campaign.' : `Could not load the scoreboard: ${board.error}`}
        </p>
      ) : null}
      {board.data ? <ImprovementFigure rows={board.data} /> : null}
      {board.data ? <FailureFigure rows={board.data} /> : null}
      {board.data ? (
        <Table caption={`${board.data.length} rows`} columns={COLUMNS} rows={board.data} rowKey={rowKey} testId="scoreboard-table" empty="No scored runs yet." />
      ) : board.loading ? (
        <p class="muted">Loading the scoreboard…</p>
      ) : null}
    </section>
  );
}
