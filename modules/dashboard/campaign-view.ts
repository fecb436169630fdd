import type { CampaignProgress, CellProgress } from '../../projections/campaign-progress/campaign-progress.js';

/** A campaign as GET /campaigns lists it. */
export function campaignItem(p: CampaignProgress) {
  return {
    campaignId: p.campaignId,
    state: p.status,
    cells: p.cells.length,
    done: p.counts.completed,
    running: p.counts.running,
    failed: p.counts.failed,
    pending: p.counts.pending,
    cancelled: p.counts.cancelled,
    scheduledAt: p.scheduledAt,
    updatedAt: p.updatedAt,
  };
}

/** A campaign's progress as GET /campaigns/:id (and its live stream) show it: the plan and one row per cell. */
export function campaignDetail(p: CampaignProgress) {
  const plan = p.scheduled!;
  return {
    ...campaignItem(p),
    matrix: plan.matrix,
    budgetSeconds: plan.budgetSeconds,
    retries: plan.retries,
    queue: plan.queue,
    revision: p.revision,
    cells: p.cells.map(cellRow),
  };
}

/** `repeat` is the cell's seed: the index of the repeat of its task × agent × driver (0 … seeds − 1). */
function cellRow(c: CellProgress) {
  return {
    cell: { index: c.cell, task: c.task, agent: c.agent, driver: c.driver ?? null, seed: c.seed, repeat: c.seed, gpus: c.gpus },
    state: c.status,
    runId: c.runId,
    attempts: c.attempt,
    runs: c.runs,
    best: c.best,
    baseline: c.baseline,
    reason: c.reason,
    worker: c.worker ? { host: c.worker.host, pid: c.worker.pid } : null,
  };
}
