import { spawnSync } from 'node:child_process';
import { memoryCgroupSupport } from './cgroup.js';
import { probeHostGpus, type HostGpus } from './gpu-binding.js';
import { noNewUserNamespacesFilter } from './seccomp.js';

/**
 * How the agent is kept apart from the harness on this machine, chosen once per process from what the
 * kernel and the installed tools allow (`a2rl doctor` prints it). Either way the agent ends up as an
 * unprivileged uid with no capability in any set, `no_new_privs`, no way to create a user namespace,
 * its own pid, IPC, UTS, cgroup and network namespaces:
 *
 * - `setuid` (harness is root): bwrap runs as root, so it can bind whatever the run needs whatever
 *   its permissions, and setpriv then drops the agent to a uid of its own (one per run), clearing
 *   every capability set; a seccomp filter refuses new user namespaces (seccomp.ts).
 * - `userns` (harness is an ordinary user): bwrap, unprivileged, puts the agent in a user namespace
 *   as the harness's uid, with no capabilities and further user namespaces disabled.
 * - `none`: no bubblewrap, or it cannot create namespaces here: the agent runs unsandboxed (loud warning).
 */
export type IsolationMode = 'userns' | 'setuid' | 'none';

export interface SandboxCapabilities {
  /** `bwrap --version`, or null when bubblewrap is not installed. */
  bwrap: string | null;
  harnessUid: number;
  setpriv: boolean;
  prlimit: boolean;
  /** bwrap can create a user namespace as an unprivileged uid (probed as the harness's uid, or nobody's when root). */
  unprivilegedUserns: boolean;
  /** bwrap can run as root with its own mount, pid and network namespaces. */
  rootNamespaces: boolean;
  /** NVIDIA device nodes of this machine (a run's sandbox binds those of the GPUs it holds: gpu-binding.ts). */
  gpuDevices: string[];
  /** The driver's libraries, tools and render nodes (absent: none known). */
  gpuDriver?: Omit<HostGpus, 'devices'>;
  /** Why a mode is not available, one line each. */
  notes: string[];
}

export interface SandboxPlan {
  mode: IsolationMode;
  capabilities: SandboxCapabilities;
}

/** The uid the agent's trial sandbox runs as while probing (any non-root id works). */
const PROBE_UID = 65534;
const TRIAL_TIMEOUT_MS = 10_000;

let cached: SandboxPlan | undefined;

/** The plan for this process (probed on first use). */
export function sandboxPlan(): SandboxPlan {
  cached ??= planFrom(probeSandbox());
  return cached;
}

export function planFrom(capabilities: SandboxCapabilities): SandboxPlan {
  const { bwrap, harnessUid, setpriv, unprivilegedUserns, rootNamespaces } = capabilities;
  let mode: IsolationMode = 'none';
  // A root harness sets the sandbox up as root: bwrap then reads every path it binds whatever its
  // permissions, and setpriv drops the agent to its own uid; an unprivileged harness needs user namespaces.
  if (bwrap && harnessUid === 0 && setpriv && rootNamespaces) mode = 'setuid';
  else if (bwrap && harnessUid !== 0 && unprivilegedUserns) mode = 'userns';
  return { mode, capabilities };
}

/** Tries the sandboxes the harness could use here (each trial is a `true` in a fresh sandbox, ~10 ms). */
export function probeSandbox(): SandboxCapabilities {
  const notes: string[] = [];
  const harnessUid = process.getuid?.() ?? -1;
  const version = spawnSync('bwrap', ['--version'], { encoding: 'utf8', timeout: TRIAL_TIMEOUT_MS });
  const bwrap = version.status === 0 ? version.stdout.trim() : null;
  const setpriv = runs('setpriv', ['--version']);
  const prlimit = runs('prlimit', ['--version']);
  if (!bwrap) notes.push('bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)');
  if (!setpriv) notes.push('setpriv (util-linux) is missing: a root harness cannot switch the agent to an unprivileged uid');
  if (!prlimit) notes.push('prlimit (util-linux) is missing: process, file-size and CPU limits are not enforced by the kernel');
  const trial = ['--ro-bind', '/', '/', '--unshare-pid', '--unshare-net', '--proc', '/proc', '--dev', '/dev'];
  // As root, the trial drops to a non-root uid first, as an unprivileged harness would be.
  const asUser = (args: string[]) =>
    harnessUid === 0 ? setpriv && runs('setpriv', [`--reuid=${PROBE_UID}`, `--regid=${PROBE_UID}`, '--clear-groups', '--', 'bwrap', ...args]) : runs('bwrap', args);
  let unprivilegedUserns = false;
  let rootNamespaces = false;
  if (bwrap) {
    unprivilegedUserns = asUser(['--unshare-user', '--disable-userns', ...trial, 'true']);
    if (!unprivilegedUserns && harnessUid !== 0) notes.push('unprivileged user namespaces are refused by this kernel (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces or an AppArmor userns restriction): run the harness as root, or allow them');
    rootNamespaces = harnessUid === 0 && runs('bwrap', [...trial, 'true']);
  }
  const { devices: gpuDevices, ...gpuDriver } = probeHostGpus();
  return { bwrap, harnessUid, setpriv, prlimit, unprivilegedUserns, rootNamespaces, gpuDevices, gpuDriver, notes };
}

function runs(file: string, args: string[]): boolean {
  const r = spawnSync(file, args, { stdio: 'ignore', timeout: TRIAL_TIMEOUT_MS });
  return r.error === undefined && r.status === 0;
}

function gpuCheck(c: SandboxCapabilities): SandboxCheck {
  if (!c.gpuDevices.length) return { name: 'GPUs', status: 'optional', detail: 'no NVIDIA device nodes on this machine' };
  const libs = c.gpuDriver?.libraries.length ?? 0;
  const tools = c.gpuDriver?.binaries.map((b) => b.split('/').pop()).join(', ');
  return {
    name: 'GPUs',
    status: 'ok',
    detail: `a run's held GPUs are bound in (of ${c.gpuDevices.join(', ')}), CUDA_VISIBLE_DEVICES per run; ${libs} driver libraries read-only${tools ? `, ${tools}` : ''}`,
  };
}

export interface SandboxCheck {
  name: string;
  status: 'ok' | 'missing' | 'optional';
  detail: string;
}

/** What `a2rl doctor` says about the sandbox: one line per defence, and what it needs here. */
export function describeSandbox(plan: SandboxPlan): SandboxCheck[] {
  const c = plan.capabilities;
  const root = c.harnessUid === 0;
  const sandboxed = plan.mode !== 'none';
  const checks: SandboxCheck[] = [
    { name: 'bubblewrap', status: c.bwrap ? 'ok' : 'missing', detail: c.bwrap ?? 'not installed: agents would run unsandboxed' },
    {
      name: 'privilege',
      status: sandboxed ? 'ok' : 'missing',
      detail: !sandboxed
        ? 'none: the agent runs as the harness user'
        : `the agent runs as ${root ? 'a uid of its own per run (harness is root)' : `uid ${c.harnessUid} (the harness user)`}, no capabilities, no_new_privs, own pid namespace and /proc`,
    },
    {
      name: 'nested user namespaces',
      status: !sandboxed ? 'missing' : plan.mode === 'userns' || noNewUserNamespacesFilter() ? 'ok' : 'optional',
      detail: !sandboxed
        ? 'not sandboxed'
        : plan.mode === 'userns'
          ? 'disabled by bwrap (--disable-userns)'
          : noNewUserNamespacesFilter()
            ? 'refused by a seccomp filter (unshare/clone with CLONE_NEWUSER)'
            : `no seccomp filter for ${process.arch}: the agent may create a user namespace, but every mount it sees stays locked`,
    },
    { name: 'network', status: sandboxed ? 'ok' : 'missing', detail: sandboxed ? 'own network namespace (loopback only): the grading API and, with --allow-net, the egress proxy are bridged in' : 'the host network, loopback services included' },
    { name: 'kernel limits', status: c.prlimit ? 'ok' : 'missing', detail: c.prlimit ? 'prlimit: processes per agent uid, file size, CPU seconds' : 'prlimit missing: only the harness-accounted limits (disk, output, checkpoint) apply' },
    (() => {
      const cgroup = memoryCgroupSupport();
      return cgroup
        ? { name: 'memory limit', status: 'ok' as const, detail: `a cgroup v${cgroup.version} per run under ${cgroup.parent}` }
        : { name: 'memory limit', status: 'optional' as const, detail: 'no writable cgroup memory controller: memoryBytes is recorded, not enforced' };
    })(),
    gpuCheck(c),
  ];
  return checks;
}
