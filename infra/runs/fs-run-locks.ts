import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
    writeFileSync(path.join(this.dir, `${lock.runId}.json`), JSON.stringify(lock));
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
    return names.sort().map((name) => JSON.parse(readFileSync(path.join(this.dir, name), 'utf8')) as RunLock);
  }

  pidFile(runId: string): string {
    return path.join(this.dir, `${runId}.pgid`);
  }
}
