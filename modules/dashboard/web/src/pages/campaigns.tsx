import { useJson, useLive } from '../api.js';
import { StateBadge } from '../components/badge.js';
import { when } from '../components/format.js';
import { Table, type Column } from '../components/table.js';
import { link } from '../router.js';
import type { CampaignCellView, CampaignDetail, CampaignListItem } from '../types.js';

const COLUMNS: Column<CampaignListItem>[] = [
  { key: 'id', label: 'Campaign', sort: (c) => c.campaignId, render: (c) => <a href={link(`/campaigns/${encodeURIComponent(c.campaignId)}`)}><code>{c.campaignId}</code></a> },
  { key: 'state', label: 'State', sort: (c) => c.state, render: (c) => <StateBadge state={c.state} testId={`campaign-state-${c.campaignId}`} /> },
  { key: 'cells', label: 'Cells', numeric: true, sort: (c) => c.cells, render: (c) => c.cells },
  { key: 'done', label: 'Done', numeric: true, sort: (c) => c.done, render: (c) => c.done },
  { key: 'running', label: 'Running', numeric: true, sort: (c) => c.running, render: (c) => c.running },
  { key: 'failed', label: 'Failed', numeric: true, sort: (c) => c.failed, render: (c) => c.failed },
  { key: 'scheduled', label: 'Scheduled', sort: (c) => c.scheduledAt, render: (c) => when(c.scheduledAt) },
  { key: 'scoreboard', label: 'Scoreboard', render: (c) => <a href={link('/scoreboard', { campaign: c.campaignId })} aria-label={`scoreboard of campaign ${c.campaignId}`}>scoreboard</a> },
];

export function CampaignsPage() {
  const list = useJson<{ items: CampaignListItem[] }>('/campaigns');
  const live = useLive(() => '/live', { campaign: () => list.reload() }, 'campaigns');
  return (
    <section aria-labelledby="campaigns-title">
      <div class="page-head">
        <h1 id="campaigns-title">Campaigns</h1>
        <span class={`live-dot ${live ? 'on' : ''}`} role="status">
          {live ? 'live' : 'not live'}
        </span>
      </div>
      {list.error ? <p role="alert">Could not load the campaigns: {list.error}</p> : null}
      {list.data ? (
        <Table caption={`${list.data.items.length} campaigns`} columns={COLUMNS} rows={list.data.items} rowKey={(c) => c.campaignId} testId="campaigns-table" initialSort={{ key: 'scheduled', dir: 'desc' }} empty="No campaigns yet: start one with `a2rl campaign run`." />
      ) : list.loading ? (
        <p class="muted">Loading campaigns…</p>
      ) : null}
    </section>
  );
}

/** A cell in either shape the API may send (the contract's `{cell, state}` or the progress fold's flat cell). */
function cellFacts(c: CampaignCellView) {
  const inner = c.cell ?? { task: c.task ?? '?', agent: c.agent ?? '?', driver: c.driver ?? null, seed: c.seed };
  const repeat = inner.repeat ?? inner.seed ?? 0;
  return { task: inner.task, agent: inner.agent, driver: inner.driver ?? null, repeat, state: c.state ?? c.status ?? 'pending', runId: c.runId, attempts: c.attempts ?? c.attempt ?? 1, reason: c.reason ?? null };
}

/** Rows: task × agent × driver; columns: the repeats (seeds). */
function matrix(cells: CampaignCellView[]) {
  const facts = cells.map(cellFacts);
  const repeats = [...new Set(facts.map((f) => f.repeat))].sort((x, y) => x - y);
  const rows = new Map<string, { task: string; agent: string; driver: string | null; byRepeat: Map<number, ReturnType<typeof cellFacts>> }>();
  for (const f of facts) {
    const key = JSON.stringify([f.task, f.agent, f.driver]);
    if (!rows.has(key)) rows.set(key, { task: f.task, agent: f.agent, driver: f.driver, byRepeat: new Map() });
    rows.get(key)!.byRepeat.set(f.repeat, f);
  }
  return { repeats, rows: [...rows.entries()] };
}

export function CampaignPage({ campaignId }: { campaignId: string }) {
  const path = `/campaigns/${encodeURIComponent(campaignId)}`;
  const detail = useJson<CampaignDetail>(path);
  const live = useLive(() => `${path}/live`, { progress: (data) => detail.set(() => data as CampaignDetail) }, campaignId);
  const d = detail.data;
  const m = d ? matrix(d.cells) : null;
  const state = d?.state ?? d?.status ?? null;
  return (
    <section aria-labelledby="campaign-title">
      <div class="page-head">
        <h1 id="campaign-title">
          Campaign <code>{campaignId}</code>
        </h1>
        {state ? <StateBadge state={state} testId="campaign-state" /> : null}
        <span class={`live-dot ${live ? 'on' : ''}`} role="status">
          {live ? 'live' : 'not live'}
        </span>
      </div>
      <nav aria-label="This campaign" class="run-links">
        <a href="#/campaigns">All campaigns</a>
        <a href={link('/scoreboard', { campaign: campaignId })}>Scoreboard</a>
        <a href={link('/runs', { campaign: campaignId })}>Runs</a>
      </nav>
      {detail.error ? <p role="alert">{detail.error}</p> : null}
      {m ? (
        <div class="table-wrap">
          <table class="matrix" data-testid="campaign-matrix">
            <caption>Cells: task × agent × driver by repeat</caption>
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">Agent</th>
                <th scope="col">Driver</th>
                {m.repeats.map((r) => (
                  <th scope="col" key={r}>
                    repeat {r}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {m.rows.map(([key, row]) => (
                <tr key={key}>
                  <th scope="row">{row.task}</th>
                  <td>{row.agent}</td>
                  <td>{row.driver ?? '—'}</td>
                  {m.repeats.map((r) => {
                    const cell = row.byRepeat.get(r);
                    if (!cell) return <td key={r} class="muted">—</td>;
                    return (
                      <td key={r} title={cell.reason ?? undefined}>
                        <StateBadge state={cell.state} />
                        {cell.runId ? (
                          <>
                            {' '}
                            <a href={link(`/runs/${encodeURIComponent(cell.runId)}`)} aria-label={`run ${cell.runId} of ${row.task}, ${row.agent}, repeat ${r}`}>
                              run
                            </a>
                          </>
                        ) : null}
                        {cell.attempts > 1 ? <span class="muted"> · attempt {cell.attempts}</span> : null}
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : detail.loading ? (
        <p class="muted">Loading the campaign…</p>
      ) : null}
    </section>
  );
}
