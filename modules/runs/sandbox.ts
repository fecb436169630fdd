import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import type { WorkspaceLayout } from './run-context.js';

export type SandboxKind = 'bwrap' | 'none';

export interface SandboxMount {
  /** Path as seen inside the sandbox. */
  path: string;
  access: 'rw' | 'ro';
}

export interface SandboxedCommand {
  file: string;
  args: string[];
  /** Host directories made visible to the agent (empty when unsandboxed: everything is). */
  mounts: SandboxMount[];
}

export interface SandboxRequest {
  kind: SandboxKind;
  workspace: WorkspaceLayout;
  /** The agent's configuration and scripts; mounted read-only at `/agent`. */
  agentDir: string;
  command: string[];
  env: Record<string, string>;
}

/** Where the agent dir appears inside the sandbox. */
export const SANDBOX_AGENT_DIR = '/agent';

const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/etc'];

/** 'bwrap' when bubblewrap is installed and can actually create a sandbox here (user namespaces, mounts). */
export function detectSandbox(): SandboxKind {
  const trial = spawnSync('bwrap', ['--ro-bind', '/', '/', 'true'], { stdio: 'ignore', timeout: 10_000 });
  return trial.error === undefined && trial.status === 0 ? 'bwrap' : 'none';
}

/**
 * Wraps `command` in a bubblewrap sandbox whose filesystem is only: system directories read-only,
 * the node install read-only, the workspace read-write at its own path (so paths the agent reports,
 * e.g. `model_path`, mean the same thing to the harness) with `data/` and `models/` re-bound
 * read-only on top, and the agent dir read-only at /agent. Everything else — A2RL_HOME, the task
 * cache with held-out data, other workspaces, the repository — does not exist inside. Pid, IPC and
 * UTS namespaces are private; the network is shared because the grading API listens on loopback.
 * The environment is exactly `env` plus defaults for PATH, HOME (the workspace) and LANG.
 *
 * With kind 'none' the command is returned as is; the caller must warn loudly.
 */
export function sandboxCommand(req: SandboxRequest): SandboxedCommand {
  const [file, ...rest] = req.command;
  if (!file) throw new TypeError('sandboxCommand: empty command');
  if (req.kind === 'none') return { file, args: rest, mounts: [] };

  const ws = req.workspace;
  const args = ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts'];
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  const mounts: SandboxMount[] = [];
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    // Merged-/usr systems have /bin -> usr/bin: recreate the link rather than bind a second copy.
    if (lstatSync(dir).isSymbolicLink()) {
      args.push('--symlink', readlinkSync(dir), dir);
    } else {
      args.push('--ro-bind', dir, dir);
      mounts.push({ path: dir, access: 'ro' });
    }
  }
  const node = nodePrefix();
  if (!SYSTEM_DIRS.some((dir) => isWithin(node, dir))) {
    args.push('--ro-bind', node, node);
    mounts.push({ path: node, access: 'ro' });
  }
  args.push('--bind', ws.root, ws.root);
  args.push('--ro-bind', ws.dataDir, ws.dataDir);
  args.push('--ro-bind', ws.modelsDir, ws.modelsDir);
  args.push('--ro-bind', req.agentDir, SANDBOX_AGENT_DIR);
  mounts.push(
    { path: ws.root, access: 'rw' },
    { path: ws.dataDir, access: 'ro' },
    { path: ws.modelsDir, access: 'ro' },
    { path: SANDBOX_AGENT_DIR, access: 'ro' },
  );
  args.push('--chdir', ws.root, '--clearenv');
  const env = { PATH: defaultPath(node), HOME: ws.root, LANG: 'C.UTF-8', ...req.env };
  for (const [key, value] of Object.entries(env)) args.push('--setenv', key, value);
  args.push('--', file, ...rest);
  return { file: 'bwrap', args, mounts };
}

/** The node installation running the harness (`<prefix>/bin/node`): agents are Node programs. */
function nodePrefix(): string {
  return dirname(dirname(realpathSync(process.execPath)));
}

function defaultPath(node: string): string {
  return [...new Set([`${node}/bin`, '/usr/local/bin', '/usr/bin', '/bin'])].join(':');
}

function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}
