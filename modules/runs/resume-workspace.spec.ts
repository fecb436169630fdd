import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { sha } from '../../test/testing/helpers.js';
import { compareWithLedger, restoreAgentFiles } from './resume-workspace.js';

// A resumed run's workspace against its ledger: compared without following links, or written back
// from the artifact store with every path kept inside the fresh workspace.

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-resume-ws-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const recorded = (p: string, body: string | null, seq = 1) => ({ path: p, sha256: body === null ? null : sha(body), size: body === null ? null : body.length, seq });

describe('compareWithLedger', () => {
  it('lists what differs from the last recorded state (created, modified, deleted), never reading through a link, ignoring data/, models/ and output/', async () => {
    const root = tempDir();
    const outside = tempDir();
    writeFileSync(path.join(outside, 'secret'), 'held-out');
    mkdirSync(path.join(root, 'code'));
    mkdirSync(path.join(root, 'output'));
    mkdirSync(path.join(root, 'data'));
    writeFileSync(path.join(root, 'code', 'same.py'), 'same');
    writeFileSync(path.join(root, 'code', 'changed.py'), 'new');
    writeFileSync(path.join(root, 'code', 'late.py'), 'written after the last fact');
    writeFileSync(path.join(root, 'output', 'ckpt.bin'), 'not watched');
    writeFileSync(path.join(root, 'data', 'x'), 'given');
    symlinkSync(path.join(outside, 'secret'), path.join(root, 'code', 'link.py'));
    const differences = await compareWithLedger(root, [recorded('code/same.py', 'same'), recorded('code/changed.py', 'old'), recorded('code/gone.py', 'gone'), recorded('code/link.py', 'was a file')]);
    expect(differences).toEqual([
      { path: 'code/changed.py', op: 'modify', sha256: sha('new'), size: 3, previousSha256: sha('old') },
      { path: 'code/gone.py', op: 'delete', previousSha256: sha('gone') },
      { path: 'code/late.py', op: 'create', sha256: sha('written after the last fact'), size: 27 },
      { path: 'code/link.py', op: 'delete', previousSha256: sha('was a file') }, // a link now: not a file of the agent's, never read
    ]);
  });
});

describe('restoreAgentFiles', () => {
  it('writes each recorded file from the store, checked; a path leaving the workspace, a file without content or without its blob, or a clashing path is unrestorable, never written', async () => {
    const root = tempDir();
    const store = new MemoryArtifactStore();
    for (const body of ['train', 'weights', 'clash']) await store.put(Buffer.from(body), { sha256: sha(body), size: body.length });
    const restored = await restoreAgentFiles(
      root,
      [
        recorded('code/train.py', 'train'),
        recorded('output/ckpt/w.bin', 'weights'),
        recorded('../escape.py', 'train'),
        recorded('code/big.bin', null),
        recorded('code/lost.py', 'never stored'),
        recorded('code/train.py/inner', 'clash'),
        recorded('run_meta.json', 'train'),
      ],
      store,
    );
    expect(restored).toEqual({ restored: 2, unrestorable: ['../escape.py', 'code/big.bin', 'code/lost.py', 'code/train.py/inner', 'run_meta.json'] });
    expect(readFileSync(path.join(root, 'code', 'train.py'), 'utf8')).toBe('train');
    expect(readFileSync(path.join(root, 'output', 'ckpt', 'w.bin'), 'utf8')).toBe('weights');
    expect(() => readFileSync(path.join(root, '..', 'escape.py'))).toThrow();
  });
});
