import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { artifactKey } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { artifactRefs, checkArtifacts, restoreCheckpoint } from './verify.service.js';
import { sha } from '../../test/testing/helpers.js';

const RUN = 'run-verify';
const at = '2026-01-01T00:00:00.000Z';

describe('artifact checks of a2rl verify', () => {
  let dir: string;
  let store: FsArtifactStore;
  const blobs = { code: Buffer.from('print(1)\n'), out: Buffer.from('hello\n'), weights: Buffer.from('{"w":[1,2]}'), manifest: Buffer.from('[]'), data: Buffer.from('train\n') };
  const ref = (b: Buffer) => ({ sha256: sha(b), size: b.length, key: artifactKey(sha(b)) });
  let events: A2rlEvent[];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-verify-unit-'));
    store = await FsArtifactStore.open(path.join(dir, 'artifacts'));
    for (const b of Object.values(blobs)) await store.put(b, { sha256: sha(b), size: b.length });
    events = [
      buildEvent('WorkspacePrepared', RUN, 0, at, { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [{ path: 'data/train.txt', sha256: sha(blobs.data), size: blobs.data.length }] }),
      buildEvent('FileChanged', RUN, 1, at, { path: 'code/a.py', op: 'create', ...ref(blobs.code), observedAt: at }),
      buildEvent('FileChanged', RUN, 2, at, { path: 'code/a.py', op: 'delete', previousSha256: sha(blobs.code), observedAt: at }),
      buildEvent('SubmissionReceived', RUN, 3, at, {
        submissionId: 's1',
        modelPath: 'output/ckpt',
        manifest: [{ path: 'weights.json', sha256: sha(blobs.weights), size: blobs.weights.length }],
        checkpoint: ref(blobs.manifest),
      }),
      buildEvent('AgentOutput', RUN, 4, at, { stream: 'stdout', chunk: ref(blobs.out), observedAt: at }),
      buildEvent('FileChanged', RUN, 5, at, { path: 'code/b.py', op: 'create', ...ref(blobs.code), observedAt: at }),
    ];
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('collects every referenced blob once, at the first event referencing it', () => {
    const refs = artifactRefs(events);
    expect(refs.map((r) => [r.seq, r.sha256])).toEqual([
      [0, sha(blobs.data)],
      [1, sha(blobs.code)],
      [3, sha(blobs.weights)],
      [3, sha(blobs.manifest)],
      [4, sha(blobs.out)],
    ]);
  });

  it('passes when every blob is present and intact', async () => {
    expect(await checkArtifacts(store, artifactRefs(events))).toEqual([]);
  });

  it('names a missing blob and an altered one by artifact key and seq', async () => {
    const outFile = path.join(dir, 'artifacts', artifactKey(sha(blobs.out)));
    const codeFile = path.join(dir, 'artifacts', artifactKey(sha(blobs.code)));
    const savedCode = readFileSync(codeFile);
    rmSync(outFile);
    rmSync(codeFile);
    writeFileSync(codeFile, 'print(2)\n');
    try {
      const failures = await checkArtifacts(store, artifactRefs(events));
      expect(failures).toEqual([
        expect.objectContaining({ check: 'artifact', seq: 1, artifact: artifactKey(sha(blobs.code)), message: expect.stringContaining('content of code/a.py: blob') }),
        expect.objectContaining({ check: 'artifact', seq: 4, artifact: artifactKey(sha(blobs.out)), message: expect.stringContaining('is missing from the artifact store') }),
      ]);
      expect(failures[0].message).toContain('was altered');
    } finally {
      rmSync(codeFile);
      writeFileSync(codeFile, savedCode);
      writeFileSync(outFile, blobs.out);
      chmodSync(codeFile, 0o444);
    }
  });

  it('flags an event whose key is not the content address of its sha256', async () => {
    const bad = buildEvent('AgentOutput', RUN, 0, at, { stream: 'stderr', chunk: { ...ref(blobs.out), key: 'elsewhere/x' }, observedAt: at });
    const failures = await checkArtifacts(store, artifactRefs([bad]));
    expect(failures).toEqual([expect.objectContaining({ seq: 0, message: expect.stringContaining('names key elsewhere/x') })]);
  });

  it('restores a checkpoint exactly and refuses paths that leave its directory', async () => {
    const target = path.join(dir, 'restored');
    await restoreCheckpoint(store, [{ path: 'sub/weights.json', sha256: sha(blobs.weights), size: blobs.weights.length }], target);
    expect(readFileSync(path.join(target, 'sub/weights.json'))).toEqual(blobs.weights);
    await expect(restoreCheckpoint(store, [{ path: '../escape', sha256: sha(blobs.weights), size: 1 }], path.join(dir, 'other'))).rejects.toThrow('not a plain relative path');
  });
});
