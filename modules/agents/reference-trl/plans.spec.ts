import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';

// The reference-trl agent's plans (<task>/plan.json) name files agent.py copies into code/: each
// must exist in the task's folder or in shared/, or the run fails inside the sandbox.
const AGENT_DIR = path.resolve('modules/agents/reference-trl');
const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

interface Plan {
  shared?: string[];
  steps: { name: string; script: string; from: string; share: number; submit?: boolean }[];
}

const tasks = readdirSync(AGENT_DIR).filter((name) => existsSync(path.join(AGENT_DIR, name, 'plan.json')));

describe('reference-trl plans', () => {
  it.each(tasks)('%s: every file the plan installs exists, and each step starts from the base or an earlier step', (task) => {
    const plan = readJson<Plan>(path.join(AGENT_DIR, task, 'plan.json'));
    const files = [...(plan.shared ?? []), ...plan.steps.map((s) => s.script)];
    for (const file of files) {
      expect([path.join(AGENT_DIR, task, file), path.join(AGENT_DIR, 'shared', file)].some((p) => existsSync(p))).toBe(true);
    }
    const earlier = new Set(['base']);
    for (const step of plan.steps) {
      expect(earlier.has(step.from)).toBe(true);
      expect(step.share).toBeGreaterThan(0);
      expect(step.share).toBeLessThanOrEqual(1);
      earlier.add(step.name);
    }
  });

  it('gsm8k trains in the context the evaluation asks in: eval_context.json holds the protocol file\'s rounds and user template', () => {
    const context = readJson<{ userTemplate: string; rounds: unknown[] }>(path.join(AGENT_DIR, 'gsm8k', 'eval_context.json'));
    const protocol = readJson<{ prompt: { userTemplate: string; fewShot: unknown[] } }>(path.resolve('tasks/gsm8k/protocol.json'));
    expect(context.userTemplate).toBe(protocol.prompt.userTemplate);
    expect(context.rounds).toEqual(protocol.prompt.fewShot);
  });
});
