import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ResolvedCommand } from '../agents/agent-registry.js';
import { agentsRoot } from '../agents/agent-registry.js';
import { writeExtraFds } from './extra-fds.js';
import { workspaceLayout } from '../workspace-fs/layout.js';
import { sandboxPlan, type SandboxPlan } from './capabilities.js';
import { sandboxCommand } from './sandbox.js';

/**
 * Which of `commands` an agent would find inside the sandbox, as its uid, with the binds and PATH a run
 * gives it: `a2rl agents` says "ready" only for what the agent will actually see, not what the host has.
 * Returns null when this machine cannot sandbox (then the host's view is the agent's).
 */
export async function commandsInSandbox(commands: ResolvedCommand[], plan: SandboxPlan = sandboxPlan()): Promise<Map<string, boolean> | null> {
  if (plan.mode === 'none') return null;
  const dir = await mkdtemp(path.join(tmpdir(), 'a2rl-probe-'));
  try {
    const layout = workspaceLayout(dir, 'probe', 'model');
    for (const d of [layout.root, layout.dataDir, layout.modelsDir]) await mkdir(d, { recursive: true, mode: 0o755 });
    const PATH = [...new Set(commands.map((c) => c.binDir)), '/usr/local/bin', '/usr/bin', '/bin'].join(':');
    const script = 'for c; do if command -v "$c" >/dev/null 2>&1; then echo "+$c"; else echo "-$c"; fi; done';
    const cmd = sandboxCommand({
      kind: 'bwrap', plan, workspace: layout, agentDir: agentsRoot(), binds: commands.flatMap((c) => c.binds),
      command: ['sh', '-c', script, 'sh', ...commands.map((c) => c.name)], env: { PATH },
    });
    const out = await runCollecting(cmd.file, cmd.args, cmd.fds ?? []);
    return new Map(commands.map((c) => [c.name, out.split('\n').includes(`+${c.name}`)]));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function runCollecting(file: string, args: string[], fds: Buffer[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, stdio: ['ignore', 'pipe', 'ignore', ...fds.map(() => 'pipe' as const)] });
    writeExtraFds(child.stdio, fds);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}
