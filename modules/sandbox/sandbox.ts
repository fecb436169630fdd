import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import path, { dirname } from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import type { WorkspaceLayout } from '../workspace-fs/layout.js';
import type { AgentRuntime } from './agent-python.js';
import { sandboxPlan, type IsolationMode, type SandboxPlan } from './capabilities.js';
import { CGROUP_ENTER } from './cgroup.js';
import { gpuBinding, visibleIds, type GpuBinding } from './gpu-binding.js';
import { noNewUserNamespacesFilter } from './seccomp.js';
import type { RunLimits } from './limits.js';

export type SandboxKind = 'bwrap' | 'none';

export interface SandboxMount {
  /** Path as seen inside the sandbox. */
  path: string;
  access: 'rw' | 'ro';
}

/** A loopback port inside the sandbox bridged to a Unix socket of the harness in the run directory. */
export interface SandboxForward {
  port: number;
  /** File name of the socket inside the run directory. */
  socket: string;
}

export interface SandboxedCommand {
  file: string;
  args: string[];
  /** Host directories made visible to the agent (empty when unsandboxed: everything is). */
  mounts: SandboxMount[];
  /**
   * What the command reads from file descriptors 3, 4…: bwrap's own options, environment included
   * (`--args 3`), so values such as credentials never appear in an argv other processes on the host
   * can read; then the seccomp filter (`--seccomp 4`). The launcher writes each into a pipe.
   */
  fds?: Buffer[];
  /** Device nodes bound in (the held GPUs' and the driver's control nodes); absent when unsandboxed. */
  devices?: string[];
}

export interface SandboxRequest {
  kind: SandboxKind;
  workspace: WorkspaceLayout;
  /** The agent's configuration and scripts; mounted read-only at `/agent`. */
  agentDir: string;
  command: string[];
  env: Record<string, string>;
  /** Default: what this machine allows (capabilities.ts). */
  plan?: SandboxPlan;
  /** The agent's uid and gid when the harness is root (default: DEFAULT_AGENT_UID). */
  agentUid?: number;
  /** The run's harness-owned directory (run_meta.json, sockets), read-only at `/run/a2rl` inside. */
  runDir?: string;
  /** Loopback ports bridged to sockets of `runDir`; without any, the agent has no network at all. */
  forwards?: SandboxForward[];
  /** A socket of `runDir` the bridge holds open: if the harness dies, the bridge kills the agent (lifeline.ts). */
  lifeline?: string;
  /** The limits the kernel enforces per process: processes of the agent's uid, file size, CPU seconds. */
  limits?: Pick<RunLimits, 'maxProcesses' | 'fileBytes' | 'cpuSeconds'>;
  /** The run's cgroup (`cgroup.procs`): its memory limit covers the whole sandbox (cgroup.ts). */
  cgroupProcs?: string;
  /** Host directories the agent's commands need (an npm-installed CLI), read-only at the same path. */
  binds?: string[];
  /** The agent's own home (its CLI's state and config, outside the workspace), read-write at SANDBOX_HOME. */
  home?: string;
  /** Its Python environment and drop-in packages (read-only at their paths) and the GPUs it holds (agent-python.ts). */
  runtime?: AgentRuntime;
}

/** Where the agent dir appears inside the sandbox. */
export const SANDBOX_AGENT_DIR = '/agent';
/** Where the agent's home appears inside the sandbox (HOME). */
export const SANDBOX_HOME = '/home/agent';
/** Where the run directory (run_meta.json, the sockets) appears inside the sandbox. */
export const SANDBOX_RUN_DIR = '/run/a2rl';
/** The in-sandbox forwarder (loopback TCP → Unix socket), mounted read-only. */
export const SANDBOX_BRIDGE = '/run/a2rl-bridge.mjs';
/** uid/gid the agent runs as when the harness is root and no other id is given. */
export const DEFAULT_AGENT_UID = 64_000;
/** Agents' uids when the harness is root: one per run in [FIRST_AGENT_UID, FIRST_AGENT_UID + AGENT_UIDS). */
const FIRST_AGENT_UID = 100_000;
const AGENT_UIDS = 60_000;

/** Loopback ports inside the sandbox: the grading API at the paper's port, the LLM gateway next to it, the egress proxy at the usual proxy port. */
export const SANDBOX_PORTS = { grading: 5000, llm: 5001, egress: 3128 } as const;

/**
 * The uid of a run's agent (root harness): derived from the run id, so two runs in flight almost never
 * share one (the process limit is per uid, and a uid can signal its own processes). Not a user of
 * this machine: nothing on the host is owned by it except the run's workspace.
 */
export function agentUidFor(runId: string): number {
  const digest = createHash('sha256').update(runId).digest();
  return FIRST_AGENT_UID + (digest.readUInt32BE(0) % AGENT_UIDS);
}

export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/etc'];

/** 'bwrap' when this machine can sandbox the agent (see capabilities.ts for how). */
export function detectSandbox(): SandboxKind {
  return sandboxPlan().mode === 'none' ? 'none' : 'bwrap';
}

/**
 * The command that runs `command` as the agent. With bwrap, the agent's whole world is: system
 * directories read-only, the node install read-only, the workspace read-write at its own path (so
 * paths the agent reports, e.g. `model_path`, mean the same thing to the harness) with `data/` and
 * `models/` re-bound read-only on top, the agent dir read-only at /agent and the run directory
 * read-only at /run/a2rl. Everything else — A2RL_HOME, the task cache with held-out data, other
 * workspaces, the repository — does not exist inside. Pid, IPC, UTS, cgroup and network namespaces
 * are private: the network is loopback only, onto which the bridge forwards exactly `forwards`. The
 * agent runs as an unprivileged uid with no capabilities and `no_new_privs` (see IsolationMode).
 * The environment is exactly `env` plus defaults for PATH, HOME (the workspace) and LANG, and, with
 * GPUs, CUDA_VISIBLE_DEVICES for the held GPUs as numbered inside (gpu-binding.ts). The agent's
 * Python environment and drop-in packages (`runtime`) are bound read-only at their own paths.
 *
 * With kind 'none' the command is returned as is; the caller must warn loudly.
 */
export function sandboxCommand(req: SandboxRequest): SandboxedCommand {
  const [file, ...rest] = req.command;
  if (!file) throw new TypeError('sandboxCommand: empty command');
  const plan = req.plan ?? sandboxPlan();
  if (req.kind === 'none' || plan.mode === 'none') return { file, args: rest, mounts: [] };

  const uid = plan.mode === 'setuid' ? (req.agentUid ?? DEFAULT_AGENT_UID) : plan.capabilities.harnessUid;
  const gpus = gpuBinding({ devices: plan.capabilities.gpuDevices, renderNodes: [], libraries: [], binaries: [], ...plan.capabilities.gpuDriver }, req.runtime?.gpus ?? visibleIds(process.env.CUDA_VISIBLE_DEVICES));
  const { options, mounts } = bwrapOptions(req, plan, uid, gpus);
  const fds = [nulSeparated(options)];
  const filter = plan.mode === 'setuid' ? noNewUserNamespacesFilter() : null;
  if (filter) fds.push(filter);
  const bwrap = ['bwrap', '--args', '3', ...(filter ? ['--seccomp', '4'] : []), '--', ...agentCommand(req, plan.mode, uid)];
  const enter = req.cgroupProcs ? ['sh', '-c', CGROUP_ENTER, req.cgroupProcs] : [];
  const outer = [...enter, ...kernelLimits(req, plan), ...bwrap];
  return { file: outer[0], args: outer.slice(1), mounts, fds, devices: gpus.devices };
}

/** Everything bwrap is told: `--clearenv` first, then the environment (bwrap applies its options in order), then the namespaces and mounts. */
function bwrapOptions(req: SandboxRequest, plan: SandboxPlan, uid: number, gpus: GpuBinding): { options: string[]; mounts: SandboxMount[] } {
  const ws = req.workspace;
  const node = nodePrefix();
  const options = ['--clearenv'];
  const env = { PATH: defaultPath(node), HOME: ws.root, LANG: 'C.UTF-8', ...req.env, ...gpuEnv(gpus, req.env.PATH ?? defaultPath(node)) };
  for (const [key, value] of Object.entries(env)) options.push('--setenv', key, value);
  options.push('--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--unshare-net');
  if (plan.mode === 'userns') options.push('--unshare-user', '--disable-userns', '--uid', String(uid), '--gid', String(uid), '--cap-drop', 'ALL');
  // /tmp is the agent's (sticky and world-writable, as on any system): CLIs keep temp files there.
  // So is /dev/shm: POSIX semaphores and shared memory live there (Python's multiprocessing locks, a
  // PyTorch DataLoader with workers); bwrap's /dev leaves it root's. Its pages count in the run's cgroup.
  options.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp', '--perms', '1777', '--tmpfs', '/dev/shm');
  const mounts: SandboxMount[] = [];
  const ro = (host: string, inside = host) => {
    options.push('--ro-bind', host, inside);
    mounts.push({ path: inside, access: 'ro' });
  };
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    // Merged-/usr systems have /bin -> usr/bin: recreate the link rather than bind a second copy.
    if (lstatSync(dir).isSymbolicLink()) options.push('--symlink', readlinkSync(dir), dir);
    else ro(dir);
  }
  if (!SYSTEM_DIRS.some((dir) => isWithin(node, dir))) ro(node);
  const shown = (dir: string) => SYSTEM_DIRS.some((sys) => isWithin(dir, sys)) || isWithin(dir, node);
  for (const dir of new Set(req.binds ?? [])) if (existsSync(dir) && !shown(dir)) ro(dir);
  const python = req.runtime?.python;
  const runtimeDirs = [python?.prefix, python?.interpreterPrefix, ...(req.runtime?.pythonPackages ?? [])];
  for (const dir of new Set(runtimeDirs)) if (dir && existsSync(dir) && !shown(dir)) ro(dir);
  options.push('--bind', ws.root, ws.root);
  mounts.push({ path: ws.root, access: 'rw' });
  if (req.home) {
    options.push('--bind', req.home, SANDBOX_HOME);
    mounts.push({ path: SANDBOX_HOME, access: 'rw' });
  }
  ro(ws.dataDir);
  ro(ws.modelsDir);
  ro(req.agentDir, SANDBOX_AGENT_DIR);
  if (req.runDir) ro(req.runDir, SANDBOX_RUN_DIR);
  options.push('--ro-bind', bridgeScript(), SANDBOX_BRIDGE);
  // GPUs: the held GPUs' device nodes, the driver's libraries and tools where /usr does not hold them
  // already, and, read-only, the sysfs the CUDA and NVML libraries enumerate devices through.
  for (const dev of gpus.devices) options.push('--dev-bind', dev, dev);
  // Not listed in `mounts` (there may be dozens): they are the host driver's, recorded as `devices` are.
  for (const file of [...gpus.libraries, ...gpus.binaries]) if (existsSync(file) && !shown(file)) options.push('--ro-bind', file, file);
  if (gpus.devices.length > 0 && existsSync('/sys')) ro('/sys');
  options.push('--chdir', ws.root);
  return { options: withTraversableParents(options), mounts };
}

/**
 * bwrap creates the missing parents of a mount point with mode 0700, which the agent's uid could
 * not cross: create them first, world-traversable (they are empty directories of the sandbox's own
 * root, not the host's).
 */
export function withTraversableParents(options: string[]): string[] {
  const destinations: string[] = [];
  for (let i = 0; i < options.length; i++) {
    if (['--bind', '--ro-bind', '--dev-bind', '--symlink'].includes(options[i])) destinations.push(options[i + 2]);
  }
  const parents = new Set<string>();
  for (const dest of destinations) {
    for (let dir = path.posix.dirname(dest); dir !== '/' && !parents.has(dir); dir = path.posix.dirname(dir)) parents.add(dir);
  }
  const system = (dir: string) => SYSTEM_DIRS.some((sys) => isWithin(dir, sys)) || dir === '/tmp' || dir === '/proc' || dir === '/dev';
  const dirs = [...parents].filter((dir) => !system(dir)).sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1));
  const first = options.findIndex((o) => o === '--bind' || o === '--ro-bind' || o === '--symlink');
  return [...options.slice(0, first), ...dirs.flatMap((dir) => ['--perms', '0755', '--dir', dir]), ...options.slice(first)];
}

/** Inside the sandbox: the bridge (when something is forwarded), then the agent, as the agent's uid. */
function agentCommand(req: SandboxRequest, mode: IsolationMode, uid: number): string[] {
  const lifeline = req.lifeline ? ['--lifeline', path.posix.join(SANDBOX_RUN_DIR, req.lifeline)] : [];
  const forwards = (req.forwards ?? []).flatMap((f) => ['--forward', `${f.port}=${path.posix.join(SANDBOX_RUN_DIR, f.socket)}`]);
  const bridge = lifeline.length || forwards.length ? ['node', SANDBOX_BRIDGE, ...lifeline, ...forwards, '--'] : [];
  // setuid mode: bwrap ran as root, so the agent's uid is taken here, after every namespace exists.
  const drop = mode === 'setuid' ? setprivTo(uid) : [];
  return [...drop, ...bridge, ...req.command];
}

export function setprivTo(uid: number): string[] {
  return ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs', '--'];
}

/** prlimit sets the per-process limits before anything of the agent runs; they are inherited. */
function kernelLimits(req: SandboxRequest, plan: SandboxPlan): string[] {
  const limits = req.limits;
  if (!limits || !plan.capabilities.prlimit) return [];
  const args = ['prlimit', `--nproc=${limits.maxProcesses}`, `--fsize=${limits.fileBytes}`];
  if (limits.cpuSeconds !== null) args.push(`--cpu=${limits.cpuSeconds}`);
  return [...args, '--'];
}

export function nulSeparated(args: string[]): Buffer {
  for (const arg of args) if (arg.includes('\0')) throw new TypeError(`sandbox argument contains a NUL byte: ${JSON.stringify(arg.slice(0, 40))}`);
  return Buffer.from(args.map((a) => `${a}\0`).join(''));
}

/** The bridge script shipped with a2rl (plain JavaScript, no dependencies: it runs inside). */
export function bridgeScript(): string {
  return path.join(packageRoot(), 'modules', 'sandbox', 'bridge.mjs');
}

/** The node installation running the harness (`<prefix>/bin/node`): agents are Node programs. */
export function nodePrefix(): string {
  return dirname(dirname(realpathSync(process.execPath)));
}

/** CUDA numbers only the GPUs whose nodes it can open; the driver's tools on PATH when /usr does not hold them. */
function gpuEnv(gpus: GpuBinding, basePath: string): Record<string, string> {
  if (gpus.visibleDevices === null) return {};
  const dirs = gpus.binaries.map((b) => path.posix.dirname(b)).filter((d) => !basePath.split(':').includes(d));
  return {
    CUDA_VISIBLE_DEVICES: gpus.visibleDevices,
    CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
    ...(dirs.length ? { PATH: [basePath, ...new Set(dirs)].join(':') } : {}),
  };
}

function defaultPath(node: string): string {
  return [...new Set([`${node}/bin`, '/usr/local/bin', '/usr/bin', '/bin'])].join(':');
}

function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(`${dir}/`);
}
