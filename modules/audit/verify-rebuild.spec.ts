import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import { PROJECTIONS } from '../../projections/index.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { artifactBlobReader } from '../../projections/blob-reader.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
import { WorkspaceRevisionRow } from '../../projections/workspace-revisions/workspace-revision.entity.js';
import type { EventStore, ReadStreamOptions, RecordedEvent } from '../ledger/event-store.port.js';
import { ProjectionRunner } from '../readmodels/projection-runner.js';
import { SignedRunWriter } from './bundle/testing/signed-run.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { LiveRunSource } from './testing/live-run-source.js';
import { RunVerifier } from './verify.service.js';

// `a2rl verify` reads the run once, checking it event by event, then rebuilds the projections from
// the store through a view that admits only the verified events, and compares rows and reports a
// page at a time. These runs have more workspace revisions than one page of rows (500).

const RUN = 'rebuild-1';
const FILES = 1200;
const AT = '2026-01-01T00:00:00.000Z';


/** A store whose event at `seq` reads back with other bytes from the `from`-th read of the stream on. */
function changingStore(store: SqliteEventStore, seq: number, from: number): EventStore {
  let reads = 0;
  return Object.assign(Object.create(store) as EventStore, {
    readStream(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent> {
      reads += 1;
      const changed = reads >= from;
      return (async function* () {
        for await (const r of store.readStream(stream, options)) {
          yield changed && Number(r.revision) === seq ? { ...r, bytes: Buffer.from(r.bytes.toString().replace('"op":"create"', '"op":"modify"')) } : r;
        }
      })();
    },
  });
}

// Caps of 180 s: each test verifies or rebuilds whole runs, which took over 60 s once with four
// spinning processes on two cores (quiet: 1-9 s).
describe('a2rl verify (RunVerifier) over a run read as a stream', () => {
  let dir: string;
  let key: SigningKey;
  let store: SqliteEventStore;
  let artifacts: FsArtifactStore;
  let live: DataSource;
  let runner: ProjectionRunner;
  const verifier = (over: EventStore = store) =>
    new RunVerifier({
      store: over,
      artifacts,
      readModels: live,
      readModelStores: { openScratch: (d) => openReadModels(`sqlite://${path.join(d, 'scratch.db')}`) },
      runs: new LiveRunSource(live, over, artifactBlobReader(artifacts)),
      catchUp: () => runner.catchUp(),
      publicKeyPem: key.publicKeyPem,
      taskCacheDir: path.join(dir, 'tasks'),
      tmpDir: dir,
    });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-verify-rebuild-'));
    key = initSigningKey(path.join(dir, 'home'));
    store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
    live = await openReadModels(`sqlite://${path.join(dir, 'live.db')}`);
    const body = Buffer.from('print("hello")\n');
    const sha256 = createHash('sha256').update(body).digest('hex');
    const { key: blobKey } = await artifacts.put(body, { sha256, size: body.length });
    const w = new SignedRunWriter(store, RUN, key, { headEvery: 500 });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await w.add('WorkspacePrepared', { workspace: '/tmp/ws', sandbox: 'none', mounts: [], dataManifest: [] });
    await w.add('AgentStarted', { command: 'bash start.sh' });
    for (let i = 0; i < FILES; i++) await w.add('FileChanged', { path: `code/f${i}.py`, op: 'create', sha256, size: body.length, key: blobKey, observedAt: AT });
    await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
    runner = new ProjectionRunner(store, live, PROJECTIONS, { blobs: artifactBlobReader(artifacts) });
  }, 180_000);
  afterAll(async () => {
    await live.destroy();
    await store.close();
    await artifacts.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes the untouched run: every event, head, blob, projection row and report', async () => {
    const result = await verifier().verify(RUN, { rebuild: true });
    expect(result.failures).toEqual([]);
    expect(result).toMatchObject({ ok: true, events: FILES + 5 + 3, treeHeads: 3, artifacts: 1 });
  }, 180_000);

  it('names live rows that are missing, extra or different, across pages of rows', async () => {
    await runner.catchUp();
    const rows = live.getRepository(WorkspaceRevisionRow);
    // Keys are strings: /1000 comes first of the rows, /999 last, 1,200 rows apart.
    const [first, last] = [await rows.findOneByOrFail({ id: `${RUN}/1000` }), await rows.findOneByOrFail({ id: `${RUN}/999` })];
    try {
      await rows.delete({ id: first.id });
      await rows.update({ id: last.id }, { occurredAt: '2026-01-02T00:00:00.000Z' });
      await rows.insert({ ...last, id: `${RUN}/99999` });
      const { failures } = await verifier().verify(RUN, { rebuild: true });
      expect(failures.filter((f) => f.check === 'projection').map((f) => f.message)).toEqual([
        `workspace-revisions row ${RUN}/1000 is missing from the live read model`,
        expect.stringContaining(`workspace-revisions row ${RUN}/999 differs from its rebuild from zero (occurredAt: live "2026-01-02T00:00:00.000Z"`),
        `workspace-revisions row ${RUN}/99999 is in the live read model but not in a rebuild from zero`,
      ]);
    } finally {
      await rows.delete({ id: `${RUN}/99999` });
      await rows.save([first, last]);
    }
    expect((await verifier().verify(RUN, { rebuild: true })).ok).toBe(true);
  }, 180_000);

  it('names the first line where a live report differs from the rebuilt one', async () => {
    await runner.catchUp();
    const rows = live.getRepository(RunAnalysisRow);
    const row = await rows.findOneByOrFail({ runId: RUN });
    try {
      const analysis = JSON.parse(row.analysis) as RunAnalysis;
      await rows.update({ runId: RUN }, { analysis: JSON.stringify({ ...analysis, agent: 'someone-else' }) });
      const { failures } = await verifier().verify(RUN, { rebuild: true });
      expect(failures.filter((f) => f.check === 'report').map((f) => f.message)).toEqual([
        expect.stringMatching(/^the md report rendered from the live read models differs from the one rendered from a rebuild \(first difference on line \d+\)$/),
        expect.stringMatching(/^the json report .* \(first difference on line 1\)$/),
        expect.stringMatching(/^the html report .* \(first difference on line \d+\)$/),
      ]);
    } finally {
      await rows.update({ runId: RUN }, { analysis: row.analysis });
    }
  }, 180_000);

  it('refuses to rebuild from an event that changed in the store after it was verified', async () => {
    // The first read is the verification; the projections' reads come after it.
    await expect(verifier(changingStore(store, 10, 2)).verify(RUN, { rebuild: true })).rejects.toThrow(`run ${RUN}: the stored event at seq 10 changed while the run was being verified; verify again`);
  }, 180_000);
});
