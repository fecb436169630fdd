import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { RedactingArtifactStore } from '../instrumentation/redacting-artifact-store.js';
import { RunRedaction } from '../instrumentation/run-redaction.js';
import { archiveAgentHome, writeAgentHomeFiles } from './agent-home.js';

const TOKEN = 'gw-token-3f9a1c7e5b2d8f4a';

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe('the agent home', () => {
  let home: string;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-home-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("writes the adapter's files under the home, owned by the agent's uid", async () => {
    await writeAgentHomeFiles(home, { '.codex/config.toml': 'model = "x"\n', 'a.json': '{}' }, process.getuid?.() === 0 ? 4242 : undefined);
    expect(readFileSync(path.join(home, '.codex/config.toml'), 'utf8')).toBe('model = "x"\n');
    if (process.getuid?.() === 0) {
      expect([statSync(path.join(home, '.codex')).uid, statSync(path.join(home, '.codex/config.toml')).uid, statSync(path.join(home, 'a.json')).uid]).toEqual([4242, 4242, 4242]);
    }
    await expect(writeAgentHomeFiles(home, { '../escape': 'x' })).rejects.toThrow(/outside the home/);
  });

  it('archives regular files redacted, skipping links, FIFOs, files over the size limit and files past the count', async () => {
    mkdirSync(path.join(home, '.codex/shell_snapshots'), { recursive: true });
    writeFileSync(path.join(home, '.codex/shell_snapshots/s.sh'), `export OPENAI_API_KEY=${TOKEN}\n`);
    writeFileSync(path.join(home, 'big.bin'), Buffer.alloc(2048));
    writeFileSync(path.join(home, 'notes.txt'), 'hello\n');
    symlinkSync('/etc/shadow', path.join(home, 'shadow'));
    execFileSync('mkfifo', [path.join(home, 'pipe')]);
    const inner = new MemoryArtifactStore();
    const store = new RedactingArtifactStore(inner, new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] }));

    const archived = await archiveAgentHome(home, store, { maxFiles: 10, maxFileBytes: 1024 });
    expect(archived.files.map((f) => f.path)).toEqual(['.codex/shell_snapshots/s.sh', 'notes.txt']);
    expect(archived.skipped).toBe(3);
    expect(archived.skippedReason).toMatch(/larger than 1024 bytes; not a regular file/);
    const snapshot = await text(await inner.get(archived.files[0].sha256));
    expect(snapshot.includes(TOKEN)).toBe(false);
    expect(snapshot).toContain('[REDACTED:gateway-token]');

    const capped = await archiveAgentHome(home, store, { maxFiles: 1, maxFileBytes: 1 << 20 });
    expect({ files: capped.files.length, skipped: capped.skipped, why: capped.skippedReason?.includes('more than 1 files') }).toEqual({ files: 1, skipped: 4, why: true });
  });
});
