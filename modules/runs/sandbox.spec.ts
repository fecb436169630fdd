import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { detectSandbox, sandboxCommand } from './sandbox.js';
import { fakeTask } from './testing/fake-task.js';
import { prepareWorkspace, type PreparedWorkspace } from './workspace.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe('sandboxCommand', () => {
  // Outside /tmp (which the sandbox replaces by a tmpfs) so that invisibility is the sandbox's doing.
  let home: string;
  let ws: PreparedWorkspace;
  let other: PreparedWorkspace;
  let agentDir: string;

  const run = (script: string, env: Record<string, string> = {}): Promise<Result> => {
    const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir, command: ['bash', '-c', script], env });
    return new Promise((resolve) => {
      execFile(cmd.file, cmd.args, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  };

  beforeAll(async () => {
    expect(detectSandbox()).toBe('bwrap');
    home = mkdtempSync('/var/tmp/a2rl-sbx-');
    const task = fakeTask();
    const base = { workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task, instructions: 'go' };
    ws = await prepareWorkspace({ ...base, runId: 'run-1' });
    other = await prepareWorkspace({ ...base, runId: 'run-2' });
    agentDir = join(home, 'agents', 'reference');
    mkdirSync(agentDir, { recursive: true });
    writeFileSync(join(agentDir, 'start.sh'), 'echo agent\n');
    writeFileSync(join(home, 'ledger.db'), 'secret');
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('hides the held-out data, A2RL_HOME, other workspaces and the repository', async () => {
    const privateFile = join(ws.privateDir, 'heldout.jsonl');
    expect(existsSync(privateFile)).toBe(true);
    const r = await run(`cat ${privateFile}; cat ${home}/ledger.db; ls ${home}/tasks; cat ${other.layout.descriptionFile}; ls ${REPO}/package.json; ls ${home}`);
    expect(r.stdout.trim()).toBe('workspaces'); // the only thing left of A2RL_HOME is the path to this workspace
    expect(r.stderr.match(/No such file or directory/g)).toHaveLength(5);
    expect(r.stdout).not.toContain('3+3');
  });

  it('makes data/ and models/ read-only while code/ and output/ are writable', async () => {
    const r = await run(
      [
        'echo x > data/new.txt',
        'echo x >> data/train.jsonl',
        'rm data/train.jsonl',
        'echo x > models/tiny-base/manifest.json',
        'mkdir models/other',
        'echo "print(1)" > code/train.py && echo wrote-code',
        'mkdir -p output/ckpt && echo {} > output/ckpt/manifest.json && echo wrote-output',
      ].join('; '),
    );
    expect(r.stderr.match(/Read-only file system/g)).toHaveLength(5);
    expect(r.stdout).toContain('wrote-code');
    expect(r.stdout).toContain('wrote-output');
    expect(readFileSync(join(ws.layout.codeDir, 'train.py'), 'utf8')).toBe('print(1)\n');
    expect(readFileSync(join(ws.layout.dataDir, 'train.jsonl'), 'utf8')).toBe('{"q":"1+1","a":"2"}\n');
  });

  it('mounts the agent dir read-only at /agent, runs in the workspace with only the given environment', async () => {
    const r = await run('cat /agent/start.sh; echo x > /agent/new 2>/dev/null || echo agent-ro; pwd; env | sort; node -e "console.log(40 + 2)"', {
      TASK: 'fake-task',
    });
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['echo agent', 'agent-ro', ws.layout.root]);
    const env = Object.fromEntries(lines.filter((l) => /^[A-Z_]+=/.test(l)).map((l) => l.split(/=(.*)/s).slice(0, 2)));
    expect(env).toMatchObject({ TASK: 'fake-task', HOME: ws.layout.root, LANG: 'C.UTF-8' });
    // Only what was given plus what bash itself sets.
    expect(Object.keys(env).filter((k) => !['HOME', 'LANG', 'OLDPWD', 'PATH', 'PWD', 'SHLVL', 'TASK', '_'].includes(k))).toEqual([]);
    expect(lines.at(-1)).toBe('42');
  });

  it('keeps the loopback network for the grading API', async () => {
    const server: Server = createServer((_req, res) => res.end('graded'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const r = await run(`node -e "fetch('http://127.0.0.1:${port}/health').then(r => r.text()).then(console.log)"`);
      expect(r.stdout.trim()).toBe('graded');
    } finally {
      server.close();
    }
  });

  it('lists what it exposes and returns the command unchanged without a sandbox', () => {
    const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir, command: ['bash', 'start.sh'], env: {} });
    expect(cmd.file).toBe('bwrap');
    expect(cmd.args.slice(-3)).toEqual(['--', 'bash', 'start.sh']);
    expect(cmd.mounts).toEqual(
      expect.arrayContaining([
        { path: ws.layout.root, access: 'rw' },
        { path: ws.layout.dataDir, access: 'ro' },
        { path: ws.layout.modelsDir, access: 'ro' },
        { path: '/agent', access: 'ro' },
        { path: '/usr', access: 'ro' },
      ]),
    );
    expect(cmd.mounts.filter((m) => m.access === 'rw')).toEqual([{ path: ws.layout.root, access: 'rw' }]);
    expect(sandboxCommand({ kind: 'none', workspace: ws.layout, agentDir, command: ['bash', 'start.sh'], env: {} })).toEqual({
      file: 'bash',
      args: ['start.sh'],
      mounts: [],
    });
  });
});
