import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { agentPythonKey, managedAgentPythonPrefix } from '../agents/agent-python-env.js';
import { agentPython, agentRuntime, dropInPackagesDir, runtimeEnv, taskPythonVariable } from './agent-python.js';

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'a2rl-agent-python-'));
  // A venv whose interpreter lives in another installation (pyenv-style), and a conda environment.
  mkdirSync(path.join(root, 'pyenv', 'versions', '3.11', 'bin'), { recursive: true });
  writeFileSync(path.join(root, 'pyenv', 'versions', '3.11', 'bin', 'python3.11'), '');
  mkdirSync(path.join(root, 'venv', 'bin'), { recursive: true });
  symlinkSync(path.join(root, 'pyenv', 'versions', '3.11', 'bin', 'python3.11'), path.join(root, 'venv', 'bin', 'python'));
  writeFileSync(path.join(root, 'venv', 'pyvenv.cfg'), `home = ${path.join(root, 'pyenv', 'versions', '3.11', 'bin')}\ninclude-system-site-packages = false\n`);
  mkdirSync(path.join(root, 'conda', 'bin'), { recursive: true });
  mkdirSync(path.join(root, 'conda', 'conda-meta'));
  writeFileSync(path.join(root, 'conda', 'bin', 'python'), '');
  mkdirSync(path.join(root, 'empty'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the agent's Python environment", () => {
  it('is none unless configured; a per-task variable wins over A2RL_AGENT_PYTHON', () => {
    expect(agentPython({}, 'gsm8k')).toBeNull();
    expect(taskPythonVariable('ref-household')).toBe('A2RL_AGENT_PYTHON_REF_HOUSEHOLD');
    const env = { A2RL_AGENT_PYTHON: path.join(root, 'venv'), A2RL_AGENT_PYTHON_ALFWORLD: path.join(root, 'conda') };
    expect(agentPython(env, 'alfworld')).toEqual({ prefix: path.join(root, 'conda'), variable: 'A2RL_AGENT_PYTHON_ALFWORLD', interpreterPrefix: null, conda: true });
    expect(agentPython(env, 'gsm8k')).toEqual({ prefix: path.join(root, 'venv'), variable: 'A2RL_AGENT_PYTHON', interpreterPrefix: path.join(root, 'pyenv', 'versions', '3.11'), conda: false });
  });

  it('falls back to the managed environment when installed for the current lock; A2RL_AGENT_PYTHON(_<TASK>) win, `none` opts out', () => {
    const cache = path.join(root, 'cache');
    const env = { A2RL_CACHE: cache };
    expect(agentPython(env, 'gsm8k')).toBeNull();
    const prefix = managedAgentPythonPrefix(env)!;
    expect(prefix).toBe(path.join(cache, 'agent-python', agentPythonKey()));
    mkdirSync(path.join(prefix, 'bin'), { recursive: true });
    symlinkSync(path.join(root, 'pyenv', 'versions', '3.11', 'bin', 'python3.11'), path.join(prefix, 'bin', 'python'));
    writeFileSync(path.join(prefix, 'pyvenv.cfg'), `home = ${path.join(root, 'pyenv', 'versions', '3.11', 'bin')}\n`);
    // Not complete until the install writes its marker, and a marker for another lock is not this one.
    expect(agentPython(env, 'gsm8k')).toBeNull();
    writeFileSync(path.join(prefix, 'a2rl-installed.json'), JSON.stringify({ key: 'another lock', python: '3.11.7', versions: {} }));
    expect(agentPython(env, 'gsm8k')).toBeNull();
    writeFileSync(path.join(prefix, 'a2rl-installed.json'), JSON.stringify({ key: agentPythonKey(), python: '3.11.7', versions: {} }));
    const managed = { prefix, variable: 'managed', interpreterPrefix: path.join(root, 'pyenv', 'versions', '3.11'), conda: false };
    expect(agentPython(env, 'gsm8k')).toEqual(managed);
    expect(agentPython({ ...env, A2RL_AGENT_PYTHON: path.join(root, 'conda') }, 'gsm8k')?.variable).toBe('A2RL_AGENT_PYTHON');
    expect(agentPython({ ...env, A2RL_AGENT_PYTHON_GSM8K: path.join(root, 'venv'), A2RL_AGENT_PYTHON: path.join(root, 'conda') }, 'gsm8k')?.variable).toBe('A2RL_AGENT_PYTHON_GSM8K');
    expect(agentPython({ ...env, A2RL_AGENT_PYTHON: 'none' }, 'gsm8k')).toBeNull();
    expect(agentPython({ ...env, A2RL_AGENT_PYTHON: path.join(root, 'conda'), A2RL_AGENT_PYTHON_GSM8K: 'none' }, 'gsm8k')).toBeNull();
    // The cache is found from the environment alone: XDG_CACHE_HOME, else HOME; none named, none used.
    expect(managedAgentPythonPrefix({ XDG_CACHE_HOME: '/x/cache', HOME: '/home/op' }, 'k')).toBe('/x/cache/a2rl/agent-python/k');
    expect(managedAgentPythonPrefix({ HOME: '/home/op' }, 'k')).toBe('/home/op/.cache/a2rl/agent-python/k');
    expect(managedAgentPythonPrefix({}, 'k')).toBeNull();
    expect(runtimeEnv(agentRuntime({ env, task: 'gsm8k', interactive: false }), { PATH: '/usr/bin' })).toEqual({ PATH: `${prefix}/bin:/usr/bin`, VIRTUAL_ENV: prefix });
  });

  it('refuses a path that is not an environment in one line naming the variable', () => {
    const refused = (value: string) => () => agentPython({ A2RL_AGENT_PYTHON: value }, 'gsm8k');
    expect(refused('envs/train')).toThrow(/^A2RL_AGENT_PYTHON=envs\/train: not an absolute path \(give the prefix of a venv or conda environment/);
    expect(refused(path.join(root, 'nope'))).toThrow(`A2RL_AGENT_PYTHON=${path.join(root, 'nope')}: no such directory`);
    expect(refused(path.join(root, 'empty'))).toThrow(`A2RL_AGENT_PYTHON=${path.join(root, 'empty')}: ${path.join(root, 'empty', 'bin', 'python')} does not exist`);
    expect(() => agentPython({ A2RL_AGENT_PYTHON_GSM8K: '/dev/null' }, 'gsm8k')).toThrow(/^A2RL_AGENT_PYTHON_GSM8K=\/dev\/null: no such directory/);
    for (const value of ['envs/train', path.join(root, 'nope')]) expect(refused(value)).toThrow(/^[^\n]+$/);
  });

  it('puts its bin/ first on PATH with VIRTUAL_ENV (CONDA_PREFIX for conda), and the drop-ins first on PYTHONPATH for interactive tasks', () => {
    const venv = agentRuntime({ env: { A2RL_AGENT_PYTHON: path.join(root, 'venv') }, task: 'alfworld', interactive: true, gpus: ['1'] });
    expect(venv.pythonPackages).toEqual([dropInPackagesDir()]);
    expect(venv.gpus).toEqual(['1']);
    expect(runtimeEnv(venv, { PATH: '/usr/bin:/bin', PYTHONPATH: '/ws/code', TASK: 'alfworld' })).toEqual({
      PATH: `${path.join(root, 'venv', 'bin')}:/usr/bin:/bin`,
      VIRTUAL_ENV: path.join(root, 'venv'),
      PYTHONPATH: `${dropInPackagesDir()}:/ws/code`,
      TASK: 'alfworld',
    });
    const conda = agentRuntime({ env: { A2RL_AGENT_PYTHON: path.join(root, 'conda') }, task: 'gsm8k', interactive: false });
    expect(runtimeEnv(conda, { PATH: '/usr/bin' })).toEqual({ PATH: `${path.join(root, 'conda', 'bin')}:/usr/bin`, CONDA_PREFIX: path.join(root, 'conda') });
    expect(runtimeEnv(agentRuntime({ env: {}, task: 'gsm8k', interactive: false }), { PATH: '/usr/bin' })).toEqual({ PATH: '/usr/bin' });
  });
});
