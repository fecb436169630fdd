import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { buildWheel, fakeIndex, PKG, WHEEL } from '../../modules/sandbox/testing/fake-index.js';
import { A2RL_BIN, agentStartedIn, runA2rl } from './a2rl-cli.js';
import type { EventData } from '../../modules/ledger/events/catalog.js';
import { integrityOk } from '../../projections/derived-facts.js';

// A hostile ad-hoc agent against the built `a2rl` binary, with the harness as root (as in CI) and the
// embedded default stores. Each attack class is its own test: the attack fails, and the ledger, the
// signing key and the host are unchanged (`a2rl verify` still passes where the run is honest).

interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

let home: string;

const a2rl = (args: string[], env: Record<string, string> = {}) => runA2rl(args, { env: { ...process.env, A2RL_HOME: home, ...env } });

/** One run of a shell-command agent; its events and what it printed. */
async function attack(script: string, opts: { args?: string[]; env?: Record<string, string> } = {}) {
  const r = await a2rl(['run', '--task', 'ref-arith', '--budget', '60s', '--json', ...(opts.args ?? []), '--agent-command', script], opts.env);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
  const runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
  const events = (await a2rl(['events', runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
  const output = events
    .filter((e) => e.type === 'AgentOutput')
    .map((e) => readFileSync(path.join(home, 'artifacts', (e.data.chunk as { key: string }).key), 'utf8'))
    .join('');
  return { runId, events, output, stderr: r.stderr };
}

const ofType = (events: Ev[], type: string) => events.filter((e) => e.type === type);
const runIdOf = (events: Ev[]) => (events[0] as Ev & { runId: string }).runId;
const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** What an attack must not change: the ledger's earlier runs and the signing key. */
function hostState(): Record<string, string> {
  const keys = path.join(home, 'keys');
  const state: Record<string, string> = {};
  for (const name of existsSync(keys) ? readdirSync(keys) : []) state[`keys/${name}`] = digest(path.join(keys, name));
  return state;
}

const root = process.getuid?.() === 0;
const describeRoot = root ? describe : describe.skip;

describeRoot('a hostile agent, harness as root', () => {
  let honest: string;
  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-hostile-'));
    // An honest run first: every attack below must leave it verifiable.
    honest = (await attack('node /agent/lib/submit.mjs output/none; true')).runId;
  }, 120_000);
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const stillVerifies = async () => {
    const r = await a2rl(['verify', honest]);
    expect({ code: r.code, out: r.stdout + r.stderr }).toEqual({ code: 0, out: expect.not.stringMatching(/fail/i) });
  };

  it('has no privilege: no capability, no mount, no device node, no remount of data/', async () => {
    const before = hostState();
    const { output, events } = await attack(
      [
        'exec 2>/dev/null',
        'grep -E "^(CapEff|CapBnd|NoNewPrivs):" /proc/self/status; id -u',
        'mount -t tmpfs none code 2>/dev/null && echo MOUNTED',
        'mknod code/sda b 8 0 2>/dev/null && echo MKNOD',
        'mount -o remount,rw,bind data 2>/dev/null && echo REMOUNTED',
        'unshare -rm true 2>/dev/null && echo USERNS',
        'echo tampered > data/train.jsonl 2>/dev/null && echo WROTE-DATA',
        `ls ${home} 2>/dev/null | grep -c ledger.db`,
      ].join('; '),
    );
    expect(output).toMatch(/CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n/);
    expect(Number(/\n(\d+)\n/.exec(output)?.[1])).toBeGreaterThanOrEqual(100_000); // a uid of its own
    expect(output).not.toMatch(/MOUNTED|MKNOD|REMOUNTED|USERNS|WROTE-DATA/);
    expect(output.trim().split('\n').at(-1)).toBe('0'); // A2RL_HOME's ledger does not exist inside
    expect(ofType(events, 'WorkspaceIntegrityChecked').map((e) => integrityOk(e.data as unknown as EventData<'WorkspaceIntegrityChecked'>))).toEqual([true]);
    // The sandbox's own machinery (cgroup entry, prlimit, bwrap, setpriv, the bridge) is not the agent's work.
    const argvs = ofType(events, 'ProcessStarted').map((e) => (e.data.argv as string[]).join(' '));
    expect(argvs[0]).toMatch(/^bash -c exec 2>\/dev\/null/);
    expect(argvs.filter((a) => /^(sh -c echo|prlimit|setpriv|bwrap)\b|a2rl-bridge/.test(a))).toEqual([]);
    expect(hostState()).toEqual(before);
    await stillVerifies();
  }, 120_000);

  it('cannot make the harness write through a link it planted in the workspace', async () => {
    const before = hostState();
    const ledger = path.join(home, 'ledger.db');
    const ledgerBefore = statSync(ledger).size;
    // The workspace is <home>/workspaces/<run>: the ledger and the key are two levels up.
    await attack(
      [
        'rm -f run_meta.json; ln -s ../../ledger.db run_meta.json; ln -s ../../ledger.db run_meta.json.tmp',
        'mkdir -p output/ck && cp models/*/* output/ck/',
        'node /agent/lib/submit.mjs output/ck',
      ].join('; '),
    );
    expect(statSync(ledger).size).toBeGreaterThanOrEqual(ledgerBefore);
    expect((await a2rl(['runs'])).code).toBe(0); // the ledger is intact
    expect(hostState()).toEqual(before);
    await stillVerifies();
  }, 120_000);

  it('reaches no loopback service of the host and no other run, only its own grading API', async () => {
    const service = net.createServer((s) => s.end('host secret\n'));
    service.listen(0, '127.0.0.1');
    await new Promise((resolve) => service.once('listening', resolve));
    const port = (service.address() as net.AddressInfo).port;
    try {
      const probe = (p: number) => `node -e "require('net').connect(${p}, '127.0.0.1').on('connect', () => { console.log('REACHED ${p}'); process.exit() }).on('error', () => console.log('refused ${p}'))"`;
      const { output, events } = await attack(
        [
          probe(port),
          probe(5432), // PostgreSQL
          probe(6379), // Redis
          'echo url=$GRADING_SERVER_URL token=${A2RL_RUN_TOKEN:-none}',
          'curl -s $GRADING_SERVER_URL/health; echo',
          'curl -s -o /dev/null -w "other=%{http_code}\\n" $GRADING_SERVER_URL/g/not-my-run/time',
        ].join('; '),
      );
      expect(output).not.toContain('REACHED');
      expect(output).toContain(`refused ${port}`);
      expect(output).toContain('url=http://127.0.0.1:5000 token=none');
      const health = JSON.parse(output.split('\n').find((l) => l.startsWith('{'))!) as { run_id: string };
      expect(health.run_id).toBe(ofType(events, 'RunScheduled').length ? runIdOf(events) : '');
      expect(output).toMatch(/other=4\d\d/);
    } finally {
      service.close();
    }
  }, 120_000);

  it('hits recorded limits: output, file size, checkpoint size (sparse), processes, memory', async () => {
    const { output, events } = await attack(
      [
        'head -c 5000000 /dev/zero | tr "\\0" x',
        'truncate -s 2G code/big 2>/dev/null || echo EFBIG >&2',
        'mkdir -p output/sparse && cp models/*/manifest.json output/sparse/ && truncate -s 1G output/sparse/weights.bin',
        'node /agent/lib/submit.mjs output/sparse >&2',
        `node -e "let ok = 0; for (let i = 0; i < 300; i++) require('child_process').spawn('sleep', ['3']).on('spawn', () => ok++).on('error', () => {}); setTimeout(() => console.error('spawned=' + ok), 1500)"`,
        `node -e "const a = []; for (let i = 0; i < 60; i++) a.push(Buffer.alloc(10 * 1024 * 1024, 1)); console.error('ALLOCATED')"; echo memory-exit=$? >&2`,
      ].join('; '),
      { args: ['--limit', 'outputBytesPerStream=1M', '--limit', 'fileBytes=1500M', '--limit', 'checkpointBytes=100M', '--limit', 'maxProcesses=64', '--limit', 'memoryBytes=256M'] },
    );
    const limits = ofType(events, 'LimitReached').map((e) => e.data.limit);
    expect(limits).toEqual(expect.arrayContaining(['outputBytesPerStream', 'checkpointBytes']));
    expect(output.length).toBeLessThanOrEqual(1024 * 1024 + 4096); // stdout archived up to the limit (stderr is small)
    expect(output.includes('EFBIG') || output.includes('File size limit exceeded')).toBe(true);
    expect(/HTTP 413/.test(output)).toBe(true);
    expect(Number(/spawned=(\d+)/.exec(output)?.[1])).toBeLessThan(64);
    const prepared = ofType(events, 'WorkspacePrepared')[0].data.isolation as { memoryEnforced: boolean };
    if (prepared.memoryEnforced) {
      expect(/^ALLOCATED$/m.test(output)).toBe(false); // booleans: the output is megabytes long
      expect(output.includes('memory-exit=137')).toBe(true);
      expect(limits).toContain('memoryBytes');
    }
    const rejected = ofType(events, 'SubmissionRejected');
    expect(rejected.map((e) => e.data.reasonClass)).toEqual(['invalid_checkpoint']);
    // Nothing of a gigabyte reached the artifact store.
    const du = (dir: string): number =>
      readdirSync(dir, { withFileTypes: true }).reduce((n, d) => n + (d.isDirectory() ? du(path.join(dir, d.name)) : statSync(path.join(dir, d.name)).blocks * 512), 0);
    expect(du(path.join(home, 'artifacts'))).toBeLessThan(200 * 1024 * 1024);
  }, 180_000);

  it('never lets a credential or the run token into the ledger or the artifact store', async () => {
    const key = 'sk-proj-Zq8vN3kLm2Xc4Rt7Yw1Bp6Hd9Jf0Gs5Ua';
    const { events, output } = await attack(
      ['echo key=$LLM_API_KEY', 'echo "$LLM_API_KEY" > code/notes.txt', 'sh -c "true $LLM_API_KEY"', 'env > code/env.txt', 'sleep 1'].join('; '),
      { env: { LLM_API_KEY: key } },
    );
    expect(output).toContain('key=[REDACTED:');
    expect(JSON.stringify(events)).not.toContain(key);
    const grep = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
        const p = path.join(dir, d.name);
        return d.isDirectory() ? grep(p) : readFileSync(p).includes(key) ? [p] : [];
      });
    expect(grep(path.join(home, 'artifacts'))).toEqual([]);
    expect(ofType(events, 'SecretRedacted').length).toBeGreaterThanOrEqual(3); // output, file, argv
  }, 120_000);

  // The sandbox sees the system's python (/usr), whose pip .ci/run installs when missing.
  const systemPip = spawnSync('/usr/bin/python3', ['-m', 'pip', '--version'], { stdio: 'ignore' }).status === 0;
  (systemPip ? it : it.skip)('reaches an allowlisted package index through the recording egress proxy, and nothing else', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-wheel-'));
    const index = await fakeIndex(buildWheel(dir));
    try {
      const { output, events } = await attack(
        [
          'exec 2>&1',
          `python3 -m pip install --quiet --no-cache-dir --disable-pip-version-check --target code/pkgs --index-url http://127.0.0.1:${index.port}/simple ${PKG.replace(/_/g, '-')}`,
          `python3 -c "import sys; sys.path.insert(0, 'code/pkgs'); import ${PKG} as m; print(m.VALUE)"`,
          'curl -s -o /dev/null -w "elsewhere=%{http_code}\\n" http://example.com/',
          `node -e "require('net').connect(${index.port}, '127.0.0.1').on('connect', () => console.log('DIRECT')).on('error', () => console.log('no direct route'))"`,
        ].join('; '),
        { args: ['--allow-net', `127.0.0.1:${index.port}`] },
      );
      expect(output).toContain('installed through the a2rl egress proxy');
      expect(output).toContain('elsewhere=403');
      expect(output).toContain('no direct route');
      const egress = ofType(events, 'EgressConnection').map((e) => e.data);
      expect(egress.filter((e) => e.allowed && e.host === '127.0.0.1' && e.port === index.port).length).toBeGreaterThanOrEqual(2);
      expect(egress).toContainEqual(expect.objectContaining({ host: 'example.com', allowed: false }));
      expect(index.hits).toEqual(expect.arrayContaining([`/simple/${PKG.replace(/_/g, '-')}/`, `/files/${WHEEL}`]));
      expect(ofType(events, 'WorkspacePrepared')[0].data.isolation).toMatchObject({ allowNet: [`127.0.0.1:${index.port}`] });
    } finally {
      index.server.closeAllConnections();
      index.server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it('records data/ changed behind the sandbox and fails a2rl verify', async () => {
    // The agent cannot write data/ (above); a change from outside during the run stands for any way around it.
    // The agent waits for the change (within its budget) rather than for a time that a busy machine could outlast.
    const agent = 'until grep -qx tampered data/train.jsonl; do sleep 0.1; done; node /agent/lib/submit.mjs output/none; sleep 1';
    const child = spawn(process.execPath, [A2RL_BIN, 'run', '--task', 'ref-arith', '--budget', '60s', '--json', '--agent-command', agent], {
      env: { ...process.env, A2RL_HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const workspaces = path.join(home, 'workspaces');
    const known = new Set(readdirSync(workspaces));
    let runId: string | undefined;
    const deadline = Date.now() + 60_000;
    while (!runId && child.exitCode === null && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      runId = readdirSync(workspaces).find((d) => !known.has(d));
    }
    expect({ runId: runId !== undefined, stderr: runId ? '' : stderr }).toEqual({ runId: true, stderr: '' });
    const target = path.join(workspaces, runId!, 'data', 'train.jsonl');
    // Prepared and baselined once the agent's start is in the ledger (read-only peek at the file).
    await agentStartedIn(home, runId!, deadline);
    chmodSync(target, 0o644);
    writeFileSync(target, 'tampered\n');
    await new Promise((resolve) => child.once('exit', resolve));
    expect((JSON.parse(stdout.trim().split('\n').pop()!) as { runId: string }).runId).toBe(runId);
    const events = (await a2rl(['events', runId!, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    const checks = ofType(events, 'WorkspaceIntegrityChecked');
    expect(checks.at(-1)!.data).toMatchObject({ phase: 'end', differences: [expect.objectContaining({ path: 'data/train.jsonl' })] });
    expect(integrityOk(checks.at(-1)!.data as unknown as EventData<'WorkspaceIntegrityChecked'>)).toBe(false);
    const verify = await a2rl(['verify', runId!]);
    expect(verify.code).not.toBe(0);
    expect(verify.stdout + verify.stderr).toMatch(/data\/train\.jsonl/);
  }, 120_000);
});

describeRoot('a hostile agent, harness as an unprivileged service user', () => {
  const user = 4242;
  let uhome: string;
  beforeAll(() => {
    uhome = mkdtempSync(path.join(os.tmpdir(), 'a2rl-hostile-user-'));
    chownSync(uhome, user, user);
  });
  afterAll(() => rmSync(uhome, { recursive: true, force: true }));

  it('sandboxes the same way: no capability, no mount, no loopback service; the run records it', async () => {
    const script = [
      'exec 2>/dev/null',
      'id -u; grep -E "^(CapEff|NoNewPrivs):" /proc/self/status',
      'mount -t tmpfs none code && echo MOUNTED',
      'unshare -rm true && echo USERNS',
      `node -e "require('net').connect(5432, '127.0.0.1').on('connect', () => console.log('REACHED')).on('error', () => console.log('refused'))"`,
      'curl -s $GRADING_SERVER_URL/health',
    ].join('; ');
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: uhome, A2RL_HOME: uhome };
    const setpriv = ['setpriv', `--reuid=${user}`, `--regid=${user}`, '--clear-groups', '--', process.execPath, A2RL_BIN];
    const run = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(setpriv[0], [...setpriv.slice(1), 'run', '--task', 'ref-arith', '--budget', '60s', '--json', '--agent-command', script], { env, stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      child.stdout.on('data', (c) => (stdout += c));
      child.on('close', (code) => resolve({ code, stdout }));
    });
    expect(run.code).toBe(0);
    const runId = (JSON.parse(run.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
    const events = (await runA2rl(['events', runId, '--json'], { env })).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    expect(ofType(events, 'WorkspacePrepared')[0].data.isolation).toMatchObject({ mode: 'userns', network: 'bridged' });
    const output = ofType(events, 'AgentOutput').map((e) => readFileSync(path.join(uhome, 'artifacts', (e.data.chunk as { key: string }).key), 'utf8')).join('');
    const lines = output.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual([String(user), 'CapEff:\t0000000000000000', 'NoNewPrivs:\t1']);
    expect(lines).toContain('refused');
    expect(output).not.toMatch(/MOUNTED|USERNS|REACHED/);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ run_id: runId });
  }, 120_000);
});
