import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { a2rlCacheDir, agentPythonDir, agentPythonKey, installAgentPython, installedAgentPython, readAgentPythonInstall } from './agent-python-env.js';

/** requirements.txt as {name: {version, hashes}} (pip-compile's layout: `name==version \` then `--hash=sha256:…` lines). */
function pins(text: string): Map<string, { version: string; hashes: string[] }> {
  const out = new Map<string, { version: string; hashes: string[] }>();
  let current: { version: string; hashes: string[] } | null = null;
  for (const line of text.split('\n')) {
    const pin = /^([A-Za-z0-9._-]+)==(\S+)/.exec(line);
    if (pin) out.set(pin[1].toLowerCase(), (current = { version: pin[2], hashes: [] }));
    const hash = /--hash=sha256:([0-9a-f]{64})/.exec(line);
    if (hash && current) current.hashes.push(hash[1]);
    if (/^[A-Za-z]/.test(line) && !pin) throw new Error(`unpinned requirement: ${line}`);
  }
  return out;
}

const requirements = pins(readFileSync(path.join(agentPythonDir(), 'requirements.txt'), 'utf8'));

describe("the agents' Python: the lock", () => {
  it('pins every package to one version with its hashes, torch to the 2.13.0 CPU wheel', () => {
    expect(requirements.size).toBeGreaterThan(20);
    for (const [name, pin] of requirements) expect([name, pin.hashes.length > 0]).toEqual([name, true]);
    expect(requirements.get('torch')?.version).toBe('2.13.0+cpu');
    for (const name of ['transformers', 'trl', 'peft', 'datasets', 'accelerate', 'safetensors', 'tokenizers']) expect(requirements.has(name)).toBe(true);
    // No CUDA build sneaks in through a dependency.
    expect([...requirements.keys()].filter((n) => n.startsWith('nvidia-') || n === 'triton')).toEqual([]);
    expect(readFileSync(path.join(agentPythonDir(), 'constraints.txt'), 'utf8')).toMatch(/^torch==2\.13\.0$/m);
  });

  it("the torch hash is the machine's local CPU wheel's, where this machine carries it", () => {
    const wheel = '/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl';
    if (!existsSync(wheel)) return; // another machine kind: pip fetches the wheel with the same hash from the index it is configured with
    expect(requirements.get('torch')?.hashes).toContain(createHash('sha256').update(readFileSync(wheel)).digest('hex'));
  });

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'a2rl-agent-python-env-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('keys the environment by the lock and the constraints: a changed pin builds a new one', () => {
    for (const file of ['requirements.txt', 'constraints.txt']) copyFileSync(path.join(agentPythonDir(), file), path.join(tmp, file));
    expect(agentPythonKey(tmp)).toBe(agentPythonKey());
    writeFileSync(path.join(tmp, 'constraints.txt'), `${readFileSync(path.join(tmp, 'constraints.txt'), 'utf8')}numpy<3\n`);
    expect(agentPythonKey(tmp)).not.toBe(agentPythonKey());
    expect(agentPythonKey()).toMatch(/^[0-9a-f]{16}$/);
  });

  it('lives in the machine cache: A2RL_CACHE, else $XDG_CACHE_HOME/a2rl, else ~/.cache/a2rl', () => {
    expect(a2rlCacheDir({ A2RL_CACHE: '/srv/a2rl-cache', XDG_CACHE_HOME: '/x', HOME: '/home/op' })).toBe('/srv/a2rl-cache');
    expect(a2rlCacheDir({ XDG_CACHE_HOME: '/x', HOME: '/home/op' })).toBe('/x/a2rl');
    expect(a2rlCacheDir({ HOME: '/home/op' })).toBe('/home/op/.cache/a2rl');
    expect(a2rlCacheDir({})).toBeNull();
  });
});

// npm test's pretest builds the environment when it is missing (`a2rl agents python install`); where that
// failed (no Python 3.11, no package index) these are skipped, and pretest printed why.
const cacheEnv = { HOME: process.env.HOME ?? '', ...(process.env.XDG_CACHE_HOME ? { XDG_CACHE_HOME: process.env.XDG_CACHE_HOME } : {}), ...(process.env.A2RL_CACHE ? { A2RL_CACHE: process.env.A2RL_CACHE } : {}) };
const prefix = installedAgentPython(cacheEnv);
const whenInstalled = prefix ? it : it.skip;
const skipped = prefix ? '' : " (skipped: the agents' Python is not installed — `a2rl agents python install`)";

describe("the agents' Python: the installed environment", () => {
  whenInstalled(`holds exactly the locked versions and imports what an agent trains with${skipped}`, () => {
    const install = readAgentPythonInstall(prefix!, agentPythonKey())!;
    for (const [name, version] of Object.entries(install.versions)) expect([name, version]).toEqual([name, requirements.get(name)?.version]);
    const python = path.join(prefix!, 'bin', 'python');
    const check = spawnSync(python, ['-m', 'pip', 'check'], { encoding: 'utf8' });
    expect(check.stdout + check.stderr).toMatch(/No broken requirements found/);
    const imported = spawnSync(python, ['-c', 'import torch, trl; from trl import GRPOTrainer, SFTTrainer; print(torch.__version__, trl.__version__, torch.cuda.is_available())'], { encoding: 'utf8' });
    expect(imported.stdout.trim()).toBe(`${requirements.get('torch')!.version} ${requirements.get('trl')!.version} False`);
  }, 300_000);

  whenInstalled(`installing again is a no-op that names the environment${skipped}`, async () => {
    const lines: string[] = [];
    expect(await installAgentPython({ env: cacheEnv, log: (l) => lines.push(l) })).toBe(prefix);
    expect(lines).toEqual([`the agents' Python is already installed in ${prefix}`]);
  });
});
