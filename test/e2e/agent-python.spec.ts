import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { installedAgentPython } from '../../modules/agents/agent-python-env.js';
import { detectSandbox } from '../../modules/sandbox/sandbox.js';
import { runA2rl } from './a2rl-cli.js';

// The agents' Python that `a2rl agents python install` builds (npm test's pretest does it when missing),
// used by a real run as the agent's Python: torch and trl import inside the sandbox, as the agent's own
// uid, from the shared environment bound read-only. Skipped (the title says so) where it is not installed.

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

const prefix = installedAgentPython(process.env);
const ready = prefix !== null && process.getuid?.() === 0 && detectSandbox() === 'bwrap';
const describeReady = ready ? describe : describe.skip;
const why = ready ? '' : " (skipped: needs root, bwrap and the agents' Python — `a2rl agents python install`)";

let home: string;
// The operator's own A2RL_AGENT_PYTHON would win over the managed environment: not here.
const env = () => {
  const { A2RL_AGENT_PYTHON: _unused, ...rest } = process.env;
  return { ...rest, A2RL_HOME: home };
};

describeReady(`the agents' Python in a run${why}`, () => {
  beforeAll(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-agent-python-'));
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('is the agent\'s python: torch and trl import in the sandbox, and the shared environment is read-only to it', async () => {
    const script = [
      'python -c "import sys, torch, trl; print(\'AGENT-PYTHON\', sys.executable, torch.__version__, trl.__version__, torch.ones(2).sum().item())"',
      'touch "$VIRTUAL_ENV/poisoned" 2>/dev/null && echo WROTE-ENV || echo ENV-READ-ONLY',
      'python -m pip install --no-index --no-deps six 2>/dev/null && echo PIP-INSTALLED || echo PIP-REFUSED',
    ].join('; ');
    const r = await runA2rl(['run', '--task', 'ref-arith', '--budget', '120s', '--json', '--agent-command', script], { env: env() });
    expect(r.code).toBe(0);
    const runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
    const events = (await runA2rl(['events', runId, '--json'], { env: env() })).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    const output = events
      .filter((e) => e.type === 'AgentOutput')
      .map((e) => readFileSync(path.join(home, 'artifacts', (e.data.chunk as { key: string }).key), 'utf8'))
      .join('');
    const install = JSON.parse(readFileSync(path.join(prefix!, 'a2rl-installed.json'), 'utf8')) as { versions: Record<string, string> };
    expect(output).toContain(`AGENT-PYTHON ${prefix}/bin/python ${install.versions.torch} ${install.versions.trl} 2.0`);
    expect(output).toContain('ENV-READ-ONLY');
    expect(output).toContain('PIP-REFUSED');
    const prepared = events.find((e) => e.type === 'WorkspacePrepared')!.data as { isolation: { python?: string }; mounts: { path: string; access: string }[] };
    expect(prepared.isolation.python).toBe(prefix);
    expect(prepared.mounts).toContainEqual({ path: prefix, access: 'ro' });
  }, 300_000);

  it('doctor names it and imports torch and trl from it inside the sandbox', async () => {
    const r = await runA2rl(['doctor', '--task', 'ref-arith', '--json'], { env: env() });
    const report = JSON.parse(r.stdout.trim().split('\n').pop()!) as { sandbox: { checks: { name: string; status: string; detail: string }[] } };
    const line = report.sandbox.checks.find((c) => c.name === 'agent python')!;
    expect(line.status).toBe('ok');
    expect(line.detail).toContain(`${prefix}/bin/python; the managed environment, \`a2rl agents python install\``);
    expect(line.detail).toMatch(/torch 2\.13\.0\+cpu \(CUDA none, no GPU usable\)/);
    expect(line.detail).toMatch(/trl \d+\.\d+\.\d+/);
    expect(line.detail).not.toMatch(/not importable/);
  }, 300_000);
});
