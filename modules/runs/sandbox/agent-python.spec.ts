import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
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
