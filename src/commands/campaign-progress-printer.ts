import cliProgress from 'cli-progress';
import type { CampaignProgress, CellProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { inertLine } from '../../modules/reports/inert-text.js';
import { num } from './cli-support.js';

// Live progress of campaigns on stderr: on a terminal a cli-progress bar per campaign (cells ended /
// cells, with the running and failed counts), and always one line per finished run, found by
// comparing each new progress with the last one seen (so a follower that starts late, or polls
// slowly, still prints every ending once).

/** `ref-arith × reference × - seed 1`: a cell as the operator named it in the matrix. */
export const cellLabel = (c: CellProgress): string => `${c.task} × ${c.agent} × ${c.driver ?? '-'} seed ${c.seed}`;

/**
 * The lines for a cell that has moved on to another attempt (a retry) and/or ended since `before`
 * (undefined: not seen before).
 */
export function finishedRunLines(campaignId: string, before: CellProgress | undefined, now: CellProgress): string[] {
  const lines: string[] = [];
  if (before !== undefined && now.attempt > before.attempt) {
    const run = before.runId ?? before.runs.at(-1);
    lines.push(`${head(campaignId, now)}: attempt ${before.attempt} failed (${now.reason ?? 'infrastructure failure'}${run ? `, run ${run}` : ''}); retrying as attempt ${now.attempt}`);
  } else if (before?.status === now.status) {
    return lines;
  }
  const ended = endLine(campaignId, now);
  if (ended) lines.push(ended);
  return lines;
}

/** How a cell ended (null: it has not). */
export function endLine(campaignId: string, c: CellProgress): string | null {
  const lastRun = c.runs.length ? ` (run ${c.runs.at(-1)})` : '';
  switch (c.status) {
    case 'completed':
      return `${head(campaignId, c)}: completed best ${num(c.best)} (run ${c.runId ?? '-'})`;
    case 'failed':
      return `${head(campaignId, c)}: failed after ${c.attempt} attempt${c.attempt === 1 ? '' : 's'}: ${c.reason ?? 'infrastructure failure'}${lastRun}`;
    case 'cancelled':
      return `${head(campaignId, c)}: cancelled${lastRun}`;
    default:
      return null;
  }
}

const head = (campaignId: string, c: CellProgress) => `[${campaignId}] cell ${c.cell} ${cellLabel(c)}`;

/** Cells ended (completed, failed or cancelled) out of all cells. */
const ended = (p: CampaignProgress): number => p.counts.completed + p.counts.failed + p.counts.cancelled;

interface Tracked {
  cells: Map<number, CellProgress>;
  /**
   * Cells seen failed by the last update, not yet printed: a retry is appended right behind its
   * RunFinished (RunRetried, the next event), so a failure is only final if the next update keeps it.
   */
  held: Map<number, CellProgress>;
  bar?: cliProgress.SingleBar;
}

export class CampaignProgressPrinter {
  private readonly tracked = new Map<string, Tracked>();
  private readonly bars: cliProgress.MultiBar | null;

  /**
   * `bars`: draw progress bars (default: when stderr is a terminal). `printExisting`: also print the
   * cells that had already ended when the campaign was first seen (a resumed or followed campaign
   * shows what it has done so far).
   */
  constructor(private readonly opts: { bars?: boolean; printExisting?: boolean; stream?: NodeJS.WriteStream } = {}) {
    const stream = opts.stream ?? process.stderr;
    this.bars = (opts.bars ?? stream.isTTY)
      ? new cliProgress.MultiBar(
          {
            stream,
            format: '{campaign} [{bar}] {value}/{total} · {running} running · {failed} failed',
            barsize: 20,
            hideCursor: true,
            clearOnComplete: false,
            stopOnComplete: false,
            autopadding: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : null;
  }

  /** Takes the campaign's latest progress (best: after every event): prints the runs finished since the last call, moves its bar. */
  update(progress: CampaignProgress): void {
    let tracked = this.tracked.get(progress.campaignId);
    const first = !tracked;
    if (!tracked) {
      tracked = { cells: new Map(), held: new Map() };
      this.tracked.set(progress.campaignId, tracked);
    }
    const held = tracked.held;
    tracked.held = new Map();
    for (const cell of progress.cells) {
      const before = tracked.cells.get(cell.cell);
      tracked.cells.set(cell.cell, cell);
      const failed = held.get(cell.cell);
      if (failed && cell.attempt === failed.attempt) this.log(endLine(progress.campaignId, failed)!); // not retried: final
      if (first && !this.opts.printExisting) continue;
      const lines = finishedRunLines(progress.campaignId, before, cell);
      if (lines.length && cell.status === 'failed') {
        tracked.held.set(cell.cell, cell);
        lines.pop();
      }
      for (const line of lines) this.log(line);
    }
    this.moveBar(tracked, progress);
  }

  /** Prints what is held, stops drawing (the bars stay on screen as they last were). */
  stop(): void {
    for (const [id, tracked] of this.tracked) {
      for (const failed of tracked.held.values()) this.log(endLine(id, failed)!);
      tracked.held.clear();
    }
    if (this.bars) {
      this.bars.update(); // draws the lines logged since the last redraw (stop() does not)
      this.bars.stop();
    }
  }

  private moveBar(tracked: Tracked, progress: CampaignProgress): void {
    if (!this.bars || !progress.cells.length) return;
    const payload = { campaign: progress.campaignId, running: progress.counts.running, failed: progress.counts.failed };
    if (!tracked.bar) tracked.bar = this.bars.create(progress.cells.length, ended(progress), payload);
    else tracked.bar.update(ended(progress), payload);
  }

  /** Prints a line above the bars (or plainly, without them); inert, since reasons and runner lines quote recorded errors. */
  log(line: string): void {
    const inert = inertLine(line);
    if (this.bars) this.bars.log(`${inert}\n`);
    else (this.opts.stream ?? process.stderr).write(`${inert}\n`);
  }
}
