import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunLock, RunLocks } from '../../modules/ledger/run-locks.port.js';

/**
 * Lock files of open runs under `<A2RL_HOME>/runs/<runId>.json` (never inside a workspace): written
 * when a run is scheduled, removed when it is sealed; what is left after a harness crash is what
 * `recoverInterruptedRuns` closes.
 */
export class FsRunLocks implements RunLocks {
  constructor(private readonly dir: string) {}

  write(lock: RunLock): void {
    mkdirSync(this.dir, { recursive: true });
    // Written whole and renamed into place: a reader (recovery, `a2rl runs`) never sees a torn lock.
    const file = path.join(this.dir, `${lock.runId}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(lock));
    renameSync(`${file}.tmp`, file);
  }

  heartbeat(runId: string, at: Date): void {
    const lock = this.read(`${runId}.json`);
    if (lock) this.write({ ...lock, aliveAt: at.toISOString() });
  }

  remove(runId: string): void {
    rmSync(path.join(this.dir, `${runId}.json`), { force: true });
  }

  list(): RunLock[] {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
    return names.sort().flatMap((name) => this.read(name) ?? []);
  }

  private read(name: string): RunLock | null {
    try {
      return JSON.parse(readFileSync(path.join(this.dir, name), 'utf8')) as RunLock;
    } catch {
      return null;
    }
  }

  pidFile(runId: string): string {
    return path.join(this.dir, `${runId}.pgid`);
  }
}
