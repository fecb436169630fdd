import type { INestApplicationContext } from '@nestjs/common';
import { EVENT_STORE } from '../../modules/ledger/tokens.js';
import { RunSource } from '../../modules/query/run-reading.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { formatSeconds } from '../../modules/settings/duration.js';
import type { CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { printScoreboard } from './analysis.commands.js';
import { num, table } from './cli-support.js';
import { jsonOut } from './terminal.js';

// What the campaign commands print: the start line, the end (scoreboard, --json line, exit status),
// `campaign status` and `campaign list` entries. src/commands/campaign.commands.ts decides when.

/** The line a campaign starts with: its matrix, budget, and how many cells are owed where. */
export function announce(campaignId: string, progress: CampaignProgress, where: string): void {
  const plan = progress.scheduled!;
  const owed = progress.cells.length - progress.counts.completed - progress.counts.failed - progress.counts.cancelled;
  process.stderr.write(
    `campaign ${campaignId}: ${progress.cells.length} cells (${plan.matrix.tasks.length} tasks × ${plan.matrix.agents.length} agents` +
      `${plan.matrix.drivers.length ? ` × ${plan.matrix.drivers.length} drivers` : ''} × ${plan.matrix.seeds} seeds), ` +
      `budget ${formatSeconds(plan.budgetSeconds)} per run, ${owed} to run ${where}\n`,
  );
}

/** The scoreboard of the campaign's accepted runs, the --json line, and the exit status. */
export async function finish(app: INestApplicationContext, progress: CampaignProgress, json?: boolean): Promise<void> {
  const { completed, failed, cancelled, running, pending } = progress.counts;
  process.stderr.write(`campaign ${progress.campaignId}: ${progress.status}, ${completed} completed, ${failed} failed${cancelled ? `, ${cancelled} cancelled` : ''}${running + pending ? `, ${running + pending} still owed` : ''}\n`);
  // With --json, stdout holds only the JSON line: the scoreboard is for the person watching, on stderr.
  const human = (text: string) => void (json ? process.stderr : process.stdout).write(text);
  if (completed) await printScoreboard({ source: app.get(RunSource), store: app.get(EVENT_STORE) }, { campaign: progress.campaignId }, human);
  if (json) process.stdout.write(jsonOut(`${campaignJson(progress)}\n`));
  if (failed || cancelled || progress.status === 'cancelled') process.exitCode ??= 1;
}

/** The `--json` line of `campaign run` / `resume`: one entry per cell × seed (state: the cell's status). */
export function campaignJson(progress: CampaignProgress): string {
  return JSON.stringify({
    campaignId: progress.campaignId,
    runs: progress.cells.map((c) => ({ runId: c.runId, task: c.task, agent: c.agent, driver: c.driver ?? null, seed: c.seed, state: c.status, best: c.best })),
    completed: progress.counts.completed,
    failed: progress.counts.failed,
  });
}

export function listEntry(p: CampaignProgress) {
  return { campaignId: p.campaignId, status: p.status, queue: p.scheduled!.queue, matrix: p.scheduled!.matrix, cells: p.cells.length, counts: p.counts, scheduledAt: p.scheduledAt, updatedAt: p.updatedAt };
}

/** `campaign status`: a header and one row per cell × seed. */
export function statusText(p: CampaignProgress): string {
  const plan = p.scheduled!;
  const c = p.counts;
  const head =
    `campaign ${p.campaignId}: ${p.status} · queue ${plan.queue}${plan.concurrency ? ` (${plan.concurrency} at a time)` : ''} · budget ${formatSeconds(plan.budgetSeconds)} per run · retries ${plan.retries}` +
    `${plan.regradeBaseline ? ' · baseline regraded per run' : ''}\n` +
    `${p.cells.length} cells: ${c.completed} completed, ${c.failed} failed, ${c.running} running, ${c.pending} pending, ${c.cancelled} cancelled · scheduled ${p.scheduledAt ?? '-'}, last change ${p.updatedAt ?? '-'}\n\n`;
  const rows = [['CELL', 'TASK', 'AGENT', 'DRIVER', 'SEED', 'STATUS', 'ATTEMPT', 'WORKER', 'RUN', 'BEST']];
  for (const cell of p.cells) {
    rows.push([String(cell.cell), cell.task, cell.agent, cell.driver ?? '-', String(cell.seed), cell.status, String(cell.attempt), cell.worker?.host ?? '-', cell.runId ?? '-', num(cell.best)]);
  }
  const reasons = p.cells.filter((cell) => cell.reason && cell.status !== 'completed').map((cell) => `  cell ${cell.cell}: ${inertLine(cell.reason!)}`);
  return `${head}${table(rows)}\n${reasons.length ? `\n${reasons.join('\n')}\n` : ''}`;
}

export const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
