import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import type { RunLocks } from '../ledger/run-locks.port.js';

/** Events read back from a run's end to find its last event that is not a signed head. */
const TAIL = 16;

export interface CancelDeps {
  store: EventStore;
  locks: Pick<RunLocks, 'list'>;
  alive: (pid: number) => boolean;
  /** process.kill in production. */
  signal: (pid: number, signal: NodeJS.Signals) => void;
  /** This server's pid: its own runs are not signalled (SIGINT would stop the server). */
  self: number;
}

export type CancelOutcome = { ok: true; runId: string; pid: number } | { ok: false; status: 404 | 409; reason: string };

const refuse = (status: 404 | 409, reason: string): CancelOutcome => ({ ok: false, status, reason });

/**
 * POST /runs/:id/cancel: a run started on its own (`a2rl run`) whose harness holds its lock on this
 * machine is cancelled by sending that harness SIGINT, as Ctrl-C in its terminal would: it stops the
 * agent and records the run's end as an operator's stop. Anything else is refused with one line.
 */
export async function cancelRun(deps: CancelDeps, runId: string): Promise<CancelOutcome> {
  const revision = await deps.store.streamRevision(streamName(runId));
  if (revision === null) return refuse(404, `no run "${runId}"`);
  for await (const first of deps.store.readStream(streamName(runId), { maxCount: 1 })) {
    const campaign = first.event.type === 'RunScheduled' ? first.event.data.campaign : undefined;
    if (campaign) return refuse(409, `run ${runId} is a job of campaign ${campaign.id}: cancel the campaign (POST /campaigns/${campaign.id}/cancel), or its worker would hand the job back and retry it`);
  }
  let last: string | null = null;
  const from = revision > BigInt(TAIL) ? revision - BigInt(TAIL) : 0n;
  for await (const r of deps.store.readStream(streamName(runId), { fromRevision: from })) if (r.event.type !== 'TreeHeadSigned') last = r.event.type;
  if (last === 'RunCompleted' || last === 'RunInterrupted') return refuse(409, `run ${runId} has already ended (${last})`);

  const locks = deps.locks.list();
  const lock = locks.find((l) => l.runId === runId);
  if (!lock) return refuse(409, `no harness on this machine holds run ${runId}: stop it where it runs (Ctrl-C in its terminal)`);
  if (lock.pid === deps.self) return refuse(409, `run ${runId} runs in this server's own process: stop it with Ctrl-C where it was started`);
  const shared = locks.filter((l) => l.pid === lock.pid).length;
  if (shared > 1) return refuse(409, `harness pid ${lock.pid} runs ${shared} runs; SIGINT would stop them all: stop that process instead`);
  if (!deps.alive(lock.pid)) return refuse(409, `the harness of run ${runId} (pid ${lock.pid}) is gone; the next a2rl start records the run as interrupted`);
  try {
    deps.signal(lock.pid, 'SIGINT');
  } catch (err) {
    return refuse(409, `cannot signal the harness of run ${runId} (pid ${lock.pid}): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { ok: true, runId, pid: lock.pid };
}
