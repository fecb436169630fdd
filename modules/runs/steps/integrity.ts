import type { ManifestEntry, WorkspaceLayout } from '../../workspace-fs/layout.js';
import type { RunSession } from '../run-session.js';
import type { SandboxKind } from '../../sandbox/sandbox.js';
import { endCheckComparesStat, integrityAtEnd, integrityBeforeGrading, type IntegrityBaseline } from '../workspace-integrity.js';

/**
 * data/ and models/ against WorkspacePrepared: before a grading a stat comparison (re-hashing what
 * changed); at the end the same for a sandboxed agent, every file re-hashed for an unsandboxed one
 * (docs/security.md). A check that cannot run is said, never fatal.
 */
export class IntegrityChecks {
  constructor(
    private readonly s: Pick<RunSession, 'runId' | 'warn' | 'record'>,
    private readonly layout: WorkspaceLayout,
    private readonly manifest: readonly ManifestEntry[],
    /** data/ and models/ as last checked (stat baseline for the next check). */
    private baseline: IntegrityBaseline,
    /** How the agent ran: the end check trusts unchanged fingerprints only in the sandbox. */
    private readonly sandbox: SandboxKind = 'none',
  ) {}

  beforeGrading(submissionId: string): Promise<void> {
    return this.check(() => integrityBeforeGrading(this.layout, this.manifest, this.baseline, submissionId));
  }

  atEnd(): Promise<void> {
    return this.check(() => integrityAtEnd(this.layout, this.manifest, 'end', endCheckComparesStat(this.sandbox) ? this.baseline : undefined));
  }

  /** A resumed run's workspace found on disk: every file re-hashed before its agent restarts. */
  atResume(): Promise<void> {
    return this.check(() => integrityAtEnd(this.layout, this.manifest, 'resume'));
  }

  private async check(run: () => ReturnType<typeof integrityAtEnd>): Promise<void> {
    try {
      const checked = await run();
      this.baseline = checked.baseline;
      await this.s.record('WorkspaceIntegrityChecked', checked.data);
    } catch (err) {
      this.s.warn(`[${this.s.runId}] could not check the integrity of data/ and models/: ${(err as Error).message}`);
    }
  }
}
