import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { agentRuntime, dropInPackagesDir } from './agent-python.js';
import { agentViewChecks, parseAgentView, probeAgentView } from './agent-view.js';
import { DEFAULT_AGENT_UID, detectSandbox } from './sandbox.js';

const H100 = [
  '@gpu GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8f1c2d3e-0000-0000-0000-000000000001)',
  '@cuda 12.4',
  `@json ${JSON.stringify({
    python: { version: '3.11.9', executable: '/opt/envs/train/bin/python' },
    torch: { version: '2.4.0+cu121', cuda: '12.1', cudaAvailable: true, devices: ['NVIDIA H100 80GB HBM3'] },
    packages: { transformers: '4.44.0', trl: '0.9.6', vllm: null },
    environments: { alfworld: `${dropInPackagesDir()}/alfworld/__init__.py`, web_agent_site: '/opt/envs/train/lib/python3.11/site-packages/web_agent_site/__init__.py' },
  })}`,
].join('\n');

describe('what the agent sees (doctor)', () => {
  it('names the GPUs, the CUDA versions, python, torch and the training packages, and where the environments import from', () => {
    const checks = agentViewChecks(parseAgentView(H100), dropInPackagesDir());
    expect(checks).toEqual([
      { name: 'agent GPUs', status: 'ok', detail: 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8f1c2d3e-0000-0000-0000-000000000001); driver CUDA 12.4' },
      {
        name: 'agent python',
        status: 'ok',
        detail:
          'python 3.11.9 (/opt/envs/train/bin/python), torch 2.4.0+cu121 (CUDA 12.1, 1 GPU(s) usable), transformers 4.44.0, trl 0.9.6, vllm not installed, ' +
          'alfworld: a2rl drop-in, web_agent_site: NOT the drop-in (/opt/envs/train/lib/python3.11/site-packages/web_agent_site/__init__.py)',
      },
    ]);
  });

  it('degrades cleanly: no GPU visible, torch not importable, no python at all, a probe that failed', () => {
    const noTorch = `@json ${JSON.stringify({ python: { version: '3.11.2', executable: '/usr/bin/python3' }, torch: { error: "ModuleNotFoundError: No module named 'torch'" }, packages: { trl: null }, environments: { alfworld: null } })}`;
    expect(agentViewChecks(parseAgentView(noTorch), dropInPackagesDir())).toEqual([
      { name: 'agent GPUs', status: 'optional', detail: 'no GPU visible' },
      { name: 'agent python', status: 'optional', detail: "python 3.11.2 (/usr/bin/python3), torch not importable (ModuleNotFoundError: No module named 'torch'), trl not installed, alfworld: not importable" },
    ]);
    // trl installed but failing to import (a torch it does not match): the import's error, and where the Python comes from.
    const badTrl = `@json ${JSON.stringify({ python: { version: '3.11.7', executable: '/opt/envs/train/bin/python' }, torch: { version: '2.13.0+cpu', cuda: null, cudaAvailable: false, devices: [] }, trl: { error: "ImportError: cannot import name 'X' from 'torch'" }, packages: { trl: '1.16.0' }, environments: {} })}`;
    expect(agentViewChecks(parseAgentView(badTrl), dropInPackagesDir(), 'A2RL_AGENT_PYTHON')[1]).toEqual({
      name: 'agent python',
      status: 'ok',
      detail: "python 3.11.7 (/opt/envs/train/bin/python; A2RL_AGENT_PYTHON), torch 2.13.0+cpu (CUDA none, no GPU usable), trl not importable (ImportError: cannot import name 'X' from 'torch')",
    });
    expect(agentViewChecks(parseAgentView('@nopython\n'), dropInPackagesDir())[1]).toEqual({ name: 'agent python', status: 'optional', detail: "no python on the agent's PATH" });
    expect(agentViewChecks(parseAgentView('', 'exit 1: bwrap: execvp bash: No such file'), dropInPackagesDir())).toEqual([
      { name: 'agent view', status: 'optional', detail: 'the probe inside the sandbox failed: exit 1: bwrap: execvp bash: No such file' },
    ]);
  });

  // The probe inside a real sandbox needs bwrap and root (as CI has); elsewhere the probe's parsing is
  // still covered by the tests above.
  const sandboxed = process.getuid?.() === 0 && detectSandbox() === 'bwrap' ? it : it.skip;
  const envs = mkdtempSync('/var/tmp/a2rl-agent-view-spec-');
  afterAll(() => rmSync(envs, { recursive: true, force: true }));

  sandboxed('runs the probe inside the sandbox with the configured environment and drop-ins (no GPU, no torch here)', async () => {
    const prefix = path.join(envs, 'train');
    expect(spawnSync('/usr/bin/python3', ['-m', 'venv', '--without-pip', prefix]).status).toBe(0);
    const runtime = agentRuntime({ env: { A2RL_AGENT_PYTHON: prefix }, task: 'alfworld', interactive: true, gpus: [] });
    const view = await probeAgentView({ kind: 'bwrap', runtime, agentUid: DEFAULT_AGENT_UID });
    expect(view.failure).toBeUndefined();
    expect(view.gpus).toEqual([]);
    expect(view.python?.executable).toBe(`${prefix}/bin/python`);
    expect(view.torch).toEqual({ error: expect.stringMatching(/^ModuleNotFoundError: No module named 'torch'/) });
    const [gpus, python] = agentViewChecks(view, dropInPackagesDir());
    expect(gpus.detail).toBe('no GPU visible');
    expect(python.detail).toMatch(/torch not importable .*trl not installed.*alfworld: a2rl drop-in, web_agent_site: a2rl drop-in$/);
  }, 60_000);
});
