import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { WorkerInfo } from '../ledger/events/catalog.js';

/** This process as a campaign worker: `<host>-<pid>-<4 hex>` (unique across restarts), its host, pid and GPU ids. */
export function workerInfo(gpus: string[] = []): WorkerInfo {
  const host = os.hostname() || 'localhost';
  const safeHost = host.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 100) || 'host';
  return { id: `${safeHost}-${process.pid}-${randomBytes(2).toString('hex')}`, host: host.slice(0, 255), pid: process.pid, gpus };
}

/** Whether the worker ran on this machine (its pid means something here). */
export const onThisMachine = (worker: WorkerInfo): boolean => worker.host === (os.hostname() || 'localhost').slice(0, 255);

/** Whether a process of this machine still exists (pid reuse aside). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
