import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeExtraFds } from './extra-fds.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { prepareWorkspace, type PreparedWorkspace } from '../runs/workspace.js';
import { agentRuntime, dropInPackagesDir, runtimeEnv } from './agent-python.js';
import { planFrom, probeSandbox, type SandboxPlan } from './capabilities.js';
import { openLifeline } from './lifeline.js';
import { DEFAULT_AGENT_UID, detectSandbox, sandboxCommand, type SandboxedCommand, type SandboxRequest } from './sandbox.js';

// The sandbox against a hostile agent, with the harness as root (as in CI). Each attack class is its
// own test: the attack fails AND the host is unchanged. Needs bubblewrap (CI installs it).

const REPO = fileURLToPath(new URL('../../..', import.meta.url)).replace(/\/$/, '');
const AGENT = { uid: DEFAULT_AGENT_UID, gid: DEFAULT_AGENT_UID };

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a sandboxed command the way the launcher does (bwrap's options on fd 3), with a deadline. */
function exec(cmd: SandboxedCommand, opts: { cwd?: string; whileRunning?: (pid: number) => void } = {}): Promise<Result> {
  return new Promise((resolve) => {
    const fds = cmd.fds ?? [];
    const child = spawn(cmd.file, cmd.args, { cwd: opts.cwd, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, stdio: ['ignore', 'pipe', 'pipe', ...fds.map(() => 'pipe' as const)] });
    writeExtraFds(child.stdio, fds);
    let stdout = '';
    let stderr = '';
    let running = false;
    child.stdout!.on('data', (c) => {
      stdout += c;
      // The command's first line says it runs inside (such a command starts with `echo up`).
      if (opts.whileRunning && !running && stdout.includes('\n')) {
        running = true;
        opts.whileRunning(child.pid!);
      }
    });
    child.stderr!.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const root = process.getuid?.() === 0;
const plan = probeSandbox();
const itRoot = root && detectSandbox() === 'bwrap' ? it : it.skip;

describe('the sandbox against a hostile agent (harness as root)', () => {
  // Outside /tmp (which the sandbox replaces by a tmpfs) so that invisibility is the sandbox's doing.
  let home: string;
  let ws: PreparedWorkspace;
  let other: PreparedWorkspace;
  let agentDir: string;
  let runDir: string;

  const request = (script: string, extra: Partial<SandboxRequest> = {}): SandboxRequest => ({
    kind: 'bwrap',
    workspace: ws.layout,
    agentDir,
    runDir,
    agentUid: AGENT.uid,
    command: ['bash', '-c', script],
    env: {},
    ...extra,
  });
  const run = (script: string, extra: Partial<SandboxRequest> = {}) => exec(sandboxCommand(request(script, extra)), { cwd: ws.layout.root });

  beforeAll(async () => {
    expect(detectSandbox()).toBe('bwrap');
    home = mkdtempSync('/var/tmp/a2rl-sbx-');
    const task = fakeTask();
    const base = { workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task, instructions: 'go', agentOwner: root ? AGENT : undefined };
    runDir = join(home, 'runs', 'run-1');
    ws = await prepareWorkspace({ ...base, runId: 'run-1', runDir, runMetaLink: '/run/a2rl/run_meta.json' });
    other = await prepareWorkspace({ ...base, runId: 'run-2', runDir: join(home, 'runs', 'run-2') });
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
    // Writing into a read-only file is refused by its mode first (EACCES), the rest by the mount (EROFS).
    expect(r.stderr.match(/Read-only file system|Permission denied/g)).toHaveLength(5);
    expect(r.stdout).toContain('wrote-code');
    expect(r.stdout).toContain('wrote-output');
    expect(readFileSync(join(ws.layout.codeDir, 'train.py'), 'utf8')).toBe('print(1)\n');
    expect(readFileSync(join(ws.layout.dataDir, 'train.jsonl'), 'utf8')).toBe('{"q":"1+1","a":"2"}\n');
  });

  it('mounts the agent dir read-only at /agent, runs in the workspace with only the given environment', async () => {
    const r = await run('cat /agent/start.sh; echo x > /agent/new 2>/dev/null || echo agent-ro; pwd; env | sort; node -e "console.log(40 + 2)"', { env: { TASK: 'fake-task' } });
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['echo agent', 'agent-ro', ws.layout.root]);
    const env = Object.fromEntries(lines.filter((l) => /^[A-Z_]+=/.test(l)).map((l) => l.split(/=(.*)/s).slice(0, 2)));
    expect(env).toMatchObject({ TASK: 'fake-task', HOME: ws.layout.root, LANG: 'C.UTF-8' });
    // Only what was given plus what bash itself sets.
    expect(Object.keys(env).filter((k) => !['HOME', 'LANG', 'OLDPWD', 'PATH', 'PWD', 'SHLVL', 'TASK', '_'].includes(k))).toEqual([]);
    expect(lines.at(-1)).toBe('42');
  });

  itRoot("binds an agent CLI's install read-only and its home read-write, and nothing beside them; /tmp is the agent's", async () => {
    const cli = join(home, 'clis', 'node_modules');
    mkdirSync(join(cli, '.bin'), { recursive: true });
    writeFileSync(join(cli, '.bin', 'fake-cli'), '#!/bin/sh\necho cli-ran\n', { mode: 0o755 });
    writeFileSync(join(home, 'clis', 'package.json'), '{}'); // beside node_modules: not bound
    const agentHome = join(home, 'agent-homes', 'run-1');
    mkdirSync(agentHome, { recursive: true });
    chownSync(agentHome, AGENT.uid, AGENT.gid);
    const r = await run(['fake-cli', 'echo state > "$HOME/state"', 'echo x > ' + join(cli, 'planted') + ' 2>/dev/null || echo RO', `ls ${join(home, 'clis')}`, 'echo "$HOME"', 'mktemp -d /tmp/cli-XXXXXX >/dev/null && stat -c %a /tmp'].join('; '), {
      binds: [cli],
      home: agentHome,
      env: { PATH: `${join(cli, '.bin')}:/usr/bin:/bin`, HOME: '/home/agent' },
    });
    expect(r.stdout.trim().split('\n')).toEqual(['cli-ran', 'RO', 'node_modules', '/home/agent', '1777']);
    expect(readFileSync(join(agentHome, 'state'), 'utf8')).toBe('state\n');
  });

  itRoot("gives the agent a /dev/shm of its own: a POSIX semaphore (Python multiprocessing's locks, a DataLoader's workers) works as the agent's uid", async () => {
    const r = await run(`stat -c %a /dev/shm; python3 -c "import multiprocessing as m; q = m.Queue(); q.put(42); print(q.get())"; ls /dev/shm | wc -l`);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout.trim().split('\n')).toEqual(['1777', '42', '0']);
  });

  itRoot('gives the agent no privilege: unprivileged uid, no capabilities, no_new_privs, its own /proc', async () => {
    const r = await run('id -u; grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):" /proc/self/status; ls /proc | grep -cE "^[0-9]+$"');
    const [uid, ...rest] = r.stdout.trim().split('\n');
    expect(Number(uid)).toBe(AGENT.uid);
    const status = Object.fromEntries(rest.slice(0, 6).map((l) => l.split(/:\s+/)));
    expect(status).toEqual({ CapInh: '0000000000000000', CapPrm: '0000000000000000', CapEff: '0000000000000000', CapBnd: '0000000000000000', CapAmb: '0000000000000000', NoNewPrivs: '1' });
    expect(Number(rest[6])).toBeLessThan(10); // bwrap's init, the shell and its children: not the host's processes
  });

  itRoot('refuses mount, mknod, remounting the read-only binds, nested namespaces and ptrace of the wrapper', async () => {
    const dev = join(ws.layout.codeDir, 'sda');
    const r = await run(
      [
        'mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED',
        `mknod ${dev} b 8 0 2>/dev/null && echo MKNOD`,
        `mount -o remount,rw,bind ${ws.layout.dataDir} 2>/dev/null && echo REMOUNTED`,
        // With a user namespace of its own the agent would hold capabilities there: the binds stay locked anyway.
        `unshare -rm sh -c "mount -o remount,rw,bind ${ws.layout.dataDir} && echo x > ${ws.layout.dataDir}/train.jsonl" 2>/dev/null && echo NESTED-WRITE`,
        'cat /proc/1/environ >/dev/null 2>&1 && echo READ-INIT-ENV',
        'strace -p 1 -o /dev/null -e trace=none & sleep 0.3; kill %1 2>/dev/null; wait 2>/dev/null',
        'echo done',
      ].join('; '),
    );
    expect(r.stdout.trim()).toBe('done');
    expect(existsSync(dev)).toBe(false);
    expect(readFileSync(join(ws.layout.dataDir, 'train.jsonl'), 'utf8')).toBe('{"q":"1+1","a":"2"}\n');
  });

  itRoot('reaches no service on the host loopback, only the bridged socket', async () => {
    const hostTcp = net.createServer((s) => s.end('host service\n'));
    hostTcp.listen(0, '127.0.0.1');
    await once(hostTcp, 'listening');
    const bridged = createHttpServer((_req, res) => res.end('graded'));
    const socket = join(runDir, 'grading.sock');
    bridged.listen(socket);
    await once(bridged, 'listening');
    chownSync(socket, 0, AGENT.gid);
    chmodSync(socket, 0o660);
    try {
      const port = (hostTcp.address() as AddressInfo).port;
      const probe = (p: number) => `node -e "require('net').connect(${p}, '127.0.0.1').on('connect', () => { console.log('open ${p}'); process.exit() }).on('error', () => {})"`;
      const r = await run([probe(port), probe(5432), probe(6379), 'curl -s --max-time 5 http://127.0.0.1:5000/health; echo'].join('; '), { forwards: [{ port: 5000, socket: 'grading.sock' }] });
      expect(r.stdout.trim()).toBe('graded');
    } finally {
      hostTcp.close();
      bridged.close();
    }
  });

  itRoot('enforces the process limit (ulimit -u) and the file size limit', async () => {
    const spawnMany = `node -e "const { spawn } = require('child_process'); let ok = 0, failed = 0;
      for (let i = 0; i < 60; i++) spawn('sleep', ['2']).on('spawn', () => ok++).on('error', () => failed++);
      setTimeout(() => console.log('running=' + ok + ' failed=' + failed), 1000)"`;
    const r = await run([spawnMany, 'ulimit -u', 'head -c 3000000 /dev/zero > code/big 2>/dev/null || echo EFBIG'].join('; '), {
      limits: { maxProcesses: 40, fileBytes: 1_000_000, cpuSeconds: null },
    });
    const running = Number(/running=(\d+)/.exec(r.stdout)?.[1]);
    expect(running).toBeGreaterThan(0);
    expect(running).toBeLessThan(40); // node's own threads count too
    expect(Number(/failed=(\d+)/.exec(r.stdout)?.[1])).toBe(60 - running);
    expect(r.stdout).toContain('\n40\n'); // ulimit -u
    expect(r.stdout).toContain('EFBIG');
    expect(statSync(join(ws.layout.codeDir, 'big')).size).toBeLessThanOrEqual(1_000_000);
  });

  itRoot('keeps its environment (tokens, keys) out of every argv visible on the host', async () => {
    const secret = 'tok-9f3b2c1d8e7a6b5c4d3e2f1a';
    const seen: string[] = [];
    // The agent waits for the look at every argv to be over (code/go) before it prints the secret.
    const go = join(ws.layout.codeDir, 'go');
    const r = await exec(sandboxCommand(request('echo up; until [ -e code/go ]; do sleep 0.05; done; echo $A2RL_SECRET', { env: { A2RL_SECRET: secret } })), {
      cwd: ws.layout.root,
      whileRunning: () => {
        for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
          try {
            seen.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
          } catch {
            // gone
          }
        }
        writeFileSync(go, '');
      },
    });
    rmSync(go, { force: true });
    expect(r.stdout.trim().split('\n')).toEqual(['up', secret]);
    expect(seen.some((c) => c.includes('--args'))).toBe(true); // the sandbox was running
    expect(seen.filter((c) => c.includes(secret))).toEqual([]);
  });

  itRoot('kills the agent through the lifeline when the harness end of it closes (a harness that died)', async () => {
    const lifeline = await openLifeline(join(runDir, 'lifeline.sock'), { gid: AGENT.gid });
    let started = false;
    const exited = exec(sandboxCommand(request('trap "" TERM; echo up; sleep 1000 & sleep 1000', { lifeline: 'lifeline.sock' })), {
      cwd: ws.layout.root,
      whileRunning: () => {
        started = true;
        void lifeline.close();
      },
    });
    const r = await exited; // without the lifeline this waits for the sleeps (and the test times out)
    expect(started).toBe(true);
    expect(r.code).not.toBe(0);
  });

  itRoot('gives a run the read-only run directory, not a path of the workspace, for run_meta.json', async () => {
    writeFileSync(join(runDir, 'run_meta.json'), '{"start_time": 1}\n');
    const r = await run('cat run_meta.json; echo x > /run/a2rl/run_meta.json 2>/dev/null || echo meta-ro; rm run_meta.json && ln -s /etc/passwd run_meta.json && echo relinked');
    expect(r.stdout.trim().split('\n')).toEqual(['{"start_time": 1}', 'meta-ro', 'relinked']);
    expect(readFileSync(join(runDir, 'run_meta.json'), 'utf8')).toBe('{"start_time": 1}\n');
  });

  itRoot('binds the GPU device nodes the machine has, and /sys read-only for the drivers to enumerate them', async () => {
    // No GPU here: a stand-in "device" shows the binding (the real one is /dev/nvidia*, see capabilities.ts).
    const device = join(home, 'nvidia0');
    writeFileSync(device, 'gpu\n');
    chmodSync(device, 0o666);
    const withGpu = planFrom({ ...plan, gpuDevices: [device] });
    const r = await run(`cat ${device}; ls /sys/class >/dev/null && echo sys; touch /sys/x 2>/dev/null || echo sys-ro`, { plan: withGpu });
    expect(r.stdout.trim().split('\n')).toEqual(['gpu', 'sys', 'sys-ro']);
    const without = await run(`cat ${device} 2>/dev/null || echo no-device; ls /sys 2>/dev/null | wc -l`);
    expect(without.stdout.trim().split('\n')).toEqual(['no-device', '0']);
  });

  itRoot("binds only the held GPUs' device nodes, the driver's libraries and tools read-only, and renumbers CUDA_VISIBLE_DEVICES", async () => {
    // Stand-ins for /dev/nvidia*, a driver library outside /usr and nvidia-smi (gpu-binding.spec.ts reads a fake /dev).
    const dev = join(home, 'fake-dev');
    const driver = join(home, 'fake-driver');
    mkdirSync(dev, { recursive: true });
    mkdirSync(driver, { recursive: true });
    for (const n of ['nvidiactl', 'nvidia-uvm', 'nvidia0', 'nvidia1', 'nvidia2']) writeFileSync(join(dev, n), `${n}\n`, { mode: 0o666 });
    writeFileSync(join(driver, 'libcuda.so.1'), 'elf\n', { mode: 0o644 });
    writeFileSync(join(driver, 'nvidia-smi'), '#!/bin/sh\necho "GPU 0: Fake (UUID: GPU-1)"\n', { mode: 0o755 });
    const withGpus = planFrom({ ...plan, gpuDevices: ['nvidiactl', 'nvidia-uvm', 'nvidia0', 'nvidia1', 'nvidia2'].map((n) => join(dev, n)), gpuDriver: { renderNodes: [], libraries: [join(driver, 'libcuda.so.1')], binaries: [join(driver, 'nvidia-smi')] } });
    const script = `for n in nvidiactl nvidia-uvm nvidia0 nvidia1 nvidia2; do cat ${dev}/$n 2>/dev/null || echo "no $n"; done; cat ${driver}/libcuda.so.1; echo x > ${driver}/libcuda.so.1 2>/dev/null || echo lib-ro; nvidia-smi; echo "cuda=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"`;
    const cmd = sandboxCommand(request(script, { plan: withGpus, runtime: { python: null, pythonPackages: [], gpus: ['2', '0'] }, env: { CUDA_VISIBLE_DEVICES: '2,0' } }));
    expect(cmd.devices).toEqual([join(dev, 'nvidiactl'), join(dev, 'nvidia-uvm'), join(dev, 'nvidia2'), join(dev, 'nvidia0')]);
    const r = await exec(cmd, { cwd: ws.layout.root });
    expect(r.stdout.trim().split('\n')).toEqual(['nvidiactl', 'nvidia-uvm', 'nvidia0', 'no nvidia1', 'nvidia2', 'elf', 'lib-ro', 'GPU 0: Fake (UUID: GPU-1)', 'cuda=0,1 order=PCI_BUS_ID']);
    const none = await exec(sandboxCommand(request(`ls ${dev} 2>/dev/null | wc -l; echo "cuda=$CUDA_VISIBLE_DEVICES"`, { plan: withGpus, runtime: { python: null, pythonPackages: [], gpus: [] } })), { cwd: ws.layout.root });
    expect(none.stdout.trim().split('\n')).toEqual(['0', 'cuda=']);
  });

  itRoot("mounts the agent's Python environment and the drop-in clients read-only, first on PATH and PYTHONPATH", async () => {
    const prefix = join(home, 'envs', 'train');
    const made = spawnSync('/usr/bin/python3', ['-m', 'venv', '--without-pip', prefix]);
    expect(made.status).toBe(0);
    const runtime = agentRuntime({ env: { A2RL_AGENT_PYTHON: prefix }, task: 'alfworld', interactive: true });
    const env = runtimeEnv(runtime, { PATH: '/usr/bin:/bin' });
    const probe = 'import sys, alfworld.agents.environment as e, web_agent_site.envs as w; print(sys.prefix); print(e.get_environment("AlfredTWEnv").__name__, w.WebAgentTextEnv.__name__); print(e.__file__)';
    const r = await run(`command -v python; python -c '${probe}'; echo "venv=$VIRTUAL_ENV"; touch ${prefix}/x 2>/dev/null || echo env-ro; touch ${dropInPackagesDir()}/x 2>/dev/null || echo drop-in-ro; ls ${dirname(dropInPackagesDir())}`, { runtime, env });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n')).toEqual([`${prefix}/bin/python`, prefix, 'AlfredTWEnv WebAgentTextEnv', join(dropInPackagesDir(), 'alfworld/agents/environment/__init__.py'), `venv=${prefix}`, 'env-ro', 'drop-in-ro', 'python']);
    expect(sandboxCommand(request('true', { runtime })).mounts).toEqual(expect.arrayContaining([{ path: prefix, access: 'ro' }, { path: dropInPackagesDir(), access: 'ro' }]));
  });

  it('lists what it exposes and returns the command unchanged without a sandbox', () => {
    const cmd = sandboxCommand({ ...request('true'), command: ['bash', 'start.sh'] });
    expect(cmd.args.slice(-2)).toEqual(['bash', 'start.sh']);
    expect(cmd.args).not.toContain(ws.layout.root); // bwrap's options travel on fd 3
    expect(cmd.fds![0].toString().split('\0')).toEqual(expect.arrayContaining(['--unshare-net', '--clearenv']));
    expect(cmd.mounts).toEqual(
      expect.arrayContaining([
        { path: ws.layout.root, access: 'rw' },
        { path: ws.layout.dataDir, access: 'ro' },
        { path: ws.layout.modelsDir, access: 'ro' },
        { path: '/agent', access: 'ro' },
        { path: '/run/a2rl', access: 'ro' },
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

  // The harness itself unprivileged (a service user): the same sandbox, with the agent as that user.
  const userns = root && plan.unprivilegedUserns ? it : it.skip;
  userns('sandboxes an unprivileged harness the same way: no capability, no mount, no loopback service', async () => {
    const harnessUid = 4242;
    const unprivileged: SandboxPlan = planFrom({ ...plan, harnessUid });
    expect(unprivileged.mode).toBe('userns');
    const uhome = mkdtempSync('/var/tmp/a2rl-sbx-user-');
    chmodSync(uhome, 0o755); // the harness user's own A2RL_HOME would be readable to it
    try {
      const uagent = join(uhome, 'agents');
      mkdirSync(uagent);
      const uws = await prepareWorkspace({ workspacesRoot: join(uhome, 'ws'), taskCacheDir: join(uhome, 'tasks'), task: fakeTask(), instructions: 'go', runId: 'run-u', agentOwner: { uid: harnessUid, gid: harnessUid } });
      const cmd = sandboxCommand({ kind: 'bwrap', plan: unprivileged, workspace: uws.layout, agentDir: uagent, command: ['bash', '-c', 'id -u; grep -E "^CapEff:" /proc/self/status; mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED; curl -s --max-time 3 http://127.0.0.1:5432/ >/dev/null; echo curl=$?'], env: {} });
      const asHarness = { ...cmd, file: 'setpriv', args: [`--reuid=${harnessUid}`, `--regid=${harnessUid}`, '--clear-groups', '--', cmd.file, ...cmd.args] };
      const r = await exec(asHarness, { cwd: uws.layout.root });
      expect(r.stderr).toBe('');
      expect(r.stdout.trim().split('\n')).toEqual([String(harnessUid), 'CapEff:\t0000000000000000', 'curl=7']);
    } finally {
      rmSync(uhome, { recursive: true, force: true });
    }
  });
});
