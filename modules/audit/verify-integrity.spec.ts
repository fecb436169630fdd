import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import { PROJECTIONS } from '../../projections/index.js';
import { artifactBlobReader } from '../../projections/blob-reader.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { ProjectionRunner } from '../readmodels/projection-runner.js';
import { SignedRunWriter } from './bundle/testing/signed-run.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { integrityFailures } from './verify-integrity.js';
import { LiveRunSource } from './testing/live-run-source.js';
import { RunVerifier } from './verify.service.js';

type Check = EventData<'WorkspaceIntegrityChecked'>;
const T = '2026-01-01T00:00:05.000Z';
const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const check = (c: Partial<Check> = {}): Check => ({ phase: 'end', ok: true, full: true, checked: 3, differences: [], observedAt: T, ...c });
const events = (...checks: Check[]): A2rlEvent[] => checks.map((c, i) => buildEvent('WorkspaceIntegrityChecked', 'r', i, T, c));

describe('integrityFailures', () => {
  it('passes a run without checks (recorded before they existed) and a run whose checks found nothing', () => {
    expect(integrityFailures([])).toEqual([]);
    expect(integrityFailures(events(check({ phase: 'grading', full: false, submissionId: 's1' }), check()))).toEqual([]);
  });

  it('fails once, at the first failing check, naming every path in one line', () => {
    const failures = integrityFailures(
      events(
        check({ phase: 'grading', full: false, submissionId: 's1' }),
        check({ phase: 'grading', full: false, submissionId: 's2', ok: false, differences: [{ path: 'data/train.jsonl', expected: A, actual: B }] }),
        check({ ok: false, differences: [{ path: 'data/new.txt', expected: null, actual: B }, { path: 'data/train.jsonl', expected: A, actual: B }, { path: 'models/m/w', expected: A, actual: null }] }),
      ),
    );
    expect(failures).toEqual([
      {
        check: 'integrity',
        seq: 1,
        message: 'read-only data/models modified: data/new.txt (added), data/train.jsonl (changed), models/m/w (missing); found by the integrity checks at seq 1 (before grading s2), seq 2 (end of run)',
      },
    ]);
    expect(failures[0].message).not.toContain('\n');
  });

  it('names at most 20 paths and counts the rest, listed or not', () => {
    const differences = Array.from({ length: 25 }, (_, i) => ({ path: `data/f${String(i).padStart(2, '0')}`, expected: null, actual: A }));
    const [failure] = integrityFailures(events(check({ ok: false, differences, moreDifferences: 40 })));
    expect(failure.message).toContain('data/f19 (added) and 45 more;');
    expect(failure.message).not.toContain('data/f20');
  });
});


describe('a2rl verify (RunVerifier) judges the read-only world', () => {
  let dir: string;
  let key: SigningKey;
  let store: SqliteEventStore;
  let artifacts: FsArtifactStore;
  let live: DataSource;
  let verifier: RunVerifier;

  async function writeRun(runId: string, end: Check): Promise<void> {
    const w = new SignedRunWriter(store, runId, key, { headEvery: 3 });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await w.add('WorkspacePrepared', { workspace: '/tmp/ws', sandbox: 'none', mounts: [], dataManifest: [] });
    await w.add('BaselineEvaluated', { score: 10, cached: false });
    await w.add('AgentStarted', { command: 'bash start.sh' });
    await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
    await w.add('WorkspaceIntegrityChecked', end);
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-verify-integrity-'));
    key = initSigningKey(path.join(dir, 'home'));
    store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
    live = await openReadModels(`sqlite://${path.join(dir, 'live.db')}`);
    await writeRun('intact', check());
    await writeRun('modified', check({ ok: false, differences: [{ path: 'data/train.jsonl', expected: A, actual: B }] }));
    const blobs = artifactBlobReader(artifacts);
    const runner = new ProjectionRunner(store, live, PROJECTIONS, { blobs });
    verifier = new RunVerifier({
      store,
      artifacts,
      readModels: live,
      readModelStores: { openScratch: (d) => openReadModels(`sqlite://${path.join(d, 'scratch.db')}`) },
      runs: new LiveRunSource(live, store, blobs),
      catchUp: () => runner.catchUp(),
      publicKeyPem: key.publicKeyPem,
      taskCacheDir: path.join(dir, 'tasks'),
      tmpDir: dir,
    });
  });
  afterAll(async () => {
    await live.destroy();
    await store.close();
    await artifacts.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes a run whose end-of-run check found data/ and models/ intact (projections and reports rebuild identically)', async () => {
    const result = await verifier.verify('intact');
    expect(result.failures).toEqual([]);
    expect(result.ok).toBe(true);
  });

  it('fails a run whose check found a modified file, with one failure naming the path', async () => {
    const result = await verifier.verify('modified');
    expect(result.ok).toBe(false);
    expect(result.failures).toEqual([
      { check: 'integrity', seq: 6, message: 'read-only data/models modified: data/train.jsonl (changed); found by the integrity check at seq 6 (end of run)' },
    ]);
  });
});
