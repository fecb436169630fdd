import type { CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { onThisMachine, processAlive } from './worker-info.js';

/** Who is asking to resume: this process, and how to tell whether a process of this machine lives. */
export interface ResumeHere {
  pid: number;
  alive: (pid: number) => boolean;
}

/**
 * Why `campaign resume` may not take the campaign up with this kind of queue, or null when it may:
 * a cancelled campaign has nothing owed; one scheduled on a Redis queue and still open may have
 * workers holding its running cells (resuming here would record their live runs as lost); and one
 * whose embedded scheduler still runs on this host is that process's to finish.
 */
export function resumeRefusal(progress: CampaignProgress, kind: 'local' | 'redis', here: ResumeHere = { pid: process.pid, alive: processAlive }): string | null {
  const id = progress.campaignId;
  if (progress.status === 'cancelled') return `campaign ${id} was cancelled; there is nothing to resume`;
  if (kind === 'local' && progress.scheduled?.queue === 'redis' && progress.status !== 'completed') {
    return `campaign ${id} runs on a Redis queue: resume it with --queue redis://…`;
  }
  const holder = liveHolderHere(progress, here);
  if (holder !== null) return `campaign ${id} is still being run by process ${holder} on this host (\`a2rl campaign status ${id} --follow\` follows it)`;
  return null;
}

/** The pid of another live process on this host that holds one of the campaign's running cells (its embedded scheduler), or null. */
export function liveHolderHere(progress: CampaignProgress, here: ResumeHere = { pid: process.pid, alive: processAlive }): number | null {
  if (progress.scheduled?.queue !== 'local') return null;
  for (const cell of progress.cells) {
    const w = cell.worker;
    if (cell.status !== 'running' || !w || !onThisMachine(w) || w.pid === here.pid) continue;
    if (here.alive(w.pid)) return w.pid;
  }
  return null;
}
