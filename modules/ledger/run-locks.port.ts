// Which harness process writes an open run's stream. The ledger has one writer per run; a lock file
// names it, so that recovery after a harness crash knows whose run was left open (adapter:
// infra/runs/fs-run-locks.ts, files under $A2RL_HOME/runs/).

/** Which harness process owns an open run: what recovery after a harness crash reads. */
export interface RunLock {
  runId: string;
  pid: number;
  /** The file holding the agent's process group, for killing leftovers after a harness crash. */
  pidFile?: string;
  /** Which launch of the run this harness serves (1, then n + 1 after n resumes; absent: 1): a lock of an earlier one was taken over elsewhere. */
  segment?: number;
  /** The harness's last heartbeat (ISO 8601): it was alive then. Kept every few seconds while its agent runs. */
  aliveAt?: string;
}

/** Lock files of open runs (one per run), kept outside every workspace. */
export interface RunLocks {
  write(lock: RunLock): void;
  remove(runId: string): void;
  /** Every lock left, in run id order. */
  list(): RunLock[];
  /** Marks the run's harness alive now (its lock's `aliveAt`); nothing when the run holds no lock here. */
  heartbeat?(runId: string, at: Date): void;
  /** Where an unsandboxed run's process group file goes. */
  pidFile(runId: string): string;
}

export const RUN_LOCKS = Symbol('RUN_LOCKS');
