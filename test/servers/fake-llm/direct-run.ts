import { spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { agentLlmSetup, loadAgent, projectCliBin } from '../../../modules/agents/agent-registry.js';
import type { FakeLlmServer } from './types.js';

// Runs a real agent CLI's adapter (start.sh) straight against a fake upstream, without the harness:
// the adapter's declared environment and home files with the gateway's prefix pointed at the fake,
// as the agent's uid when root. The fakes' specs use it; the end-to-end suite goes through a2rl.

export const AGENT_UID = 4242;

export interface DirectRun {
  home: string;
  workspace: string;
  env: Record<string, string>;
  model: string;
  /** The adapter's home files as written (paths relative to the home). */
  files: Record<string, string>;
}

/**
 * A fresh home and workspace under `root`, the adapter's files written (through `edit`), and the
 * environment the sandbox would pass. `gatewayPrefix` (e.g. `{gateway}/anthropic`) becomes the fake's URL.
 */
export function prepareDirectRun(root: string, opts: { agent: string; gatewayPrefix: string; fakeUrl: string; token: string; edit?: (text: string) => string }): DirectRun {
  const home = path.join(root, 'home');
  const workspace = path.join(root, 'workspace');
  mkdirSync(home);
  mkdirSync(workspace);
  writeFileSync(path.join(workspace, 'description.md'), '# Task\nTrain a model.\n');
  writeFileSync(path.join(workspace, 'instructions.md'), 'Write code/train.py, run it, submit.\n');
  const spec = loadAgent(opts.agent);
  const llm = spec.llm!;
  const direct = (entries: Record<string, string> = {}) => Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, v.replaceAll(opts.gatewayPrefix, opts.fakeUrl)]));
  const setup = agentLlmSetup({ ...llm, env: direct(llm.env), files: direct(llm.files) }, { gateway: 'http://127.0.0.1:1', token: opts.token, model: llm.defaultModel, home, workspace });
  const files = Object.fromEntries(Object.entries(setup.files).map(([rel, content]) => [rel, (opts.edit ?? ((t) => t))(content)]));
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(home, rel)), { recursive: true });
    writeFileSync(path.join(home, rel), content);
  }
  if (process.getuid?.() === 0) chownTree(root, AGENT_UID);
  const env = {
    ...setup.env,
    PATH: `${projectCliBin()}:/usr/local/bin:/usr/bin:/bin`,
    HOME: home,
    LANG: 'C.UTF-8',
    WORKSPACE: workspace,
    LLM_MODEL: llm.defaultModel,
    A2RL_AGENT_DIR: spec.dir!,
    GRADING_SERVER_URL: 'http://127.0.0.1:1',
  };
  return { home, workspace, env, model: llm.defaultModel, files };
}

export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : e.isFile() ? [path.join(dir, e.name)] : []));
}

function chownTree(dir: string, uid: number): void {
  chownSync(dir, uid, uid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) chownTree(p, uid);
    else chownSync(p, uid, uid);
  }
}

/**
 * Runs start.sh with exactly `env` (as uid 4242 when root, unless `asAgent` is false); the exit code and
 * the output's last 8000 characters. `killWhen` resolving SIGKILLs its process group at once (a harness
 * lost mid-run).
 */
export function runStartScript(env: Record<string, string>, cwd: string, timeoutMs: number, killWhen?: Promise<unknown>, asAgentUid = true): Promise<{ code: number | null; tail: string }> {
  const start = path.join(env.A2RL_AGENT_DIR, 'start.sh');
  const pairs = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  const asAgent = asAgentUid && process.getuid?.() === 0 ? ['setpriv', `--reuid=${AGENT_UID}`, `--regid=${AGENT_UID}`, '--clear-groups'] : [];
  const argv = [...asAgent, 'env', '-i', ...pairs, 'bash', start];
  return new Promise((resolve) => {
    const child = spawn(argv[0], argv.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-8000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let closed = false;
    const timer = setTimeout(() => {
      output += '\n[killed after timeout]';
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    }, timeoutMs);
    void killWhen?.then(() => {
      if (closed || !child.pid) return;
      output += '\n[killed by the test]';
      process.kill(-child.pid, 'SIGKILL');
    });
    child.on('close', (code) => {
      closed = true;
      clearTimeout(timer);
      resolve({ code, tail: output });
    });
  });
}

/**
 * SIGKILLs every process whose working directory lies under `root`: what a direct run's agent left
 * behind, such as a server that daemonized out of start.sh's process group (OpenHands' tmux). An a2rl
 * run sweeps these through its cgroup or process group; a direct run has neither.
 */
export function killProcessesUnder(root: string): void {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      if (cwd === root || cwd.startsWith(`${root}/`)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone already, or not ours to read
    }
  }
}

/** A fake in `hang` mode: waits until `request` has arrived, closes the fake, and says how the request ended. */
export async function closeWhileHanging(fake: FakeLlmServer, request: Promise<unknown>): Promise<'answered' | 'failed'> {
  const pending = request.then(
    () => 'answered' as const,
    () => 'failed' as const,
  );
  while (fake.calls.length === 0) await new Promise((r) => setTimeout(r, 20));
  await fake.close();
  return pending;
}
