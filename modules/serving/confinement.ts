import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, mkdtemp, opendir, readFile, rename, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import { sandboxPlan, type IsolationMode, type SandboxPlan } from '../sandbox/capabilities.js';
import { createRunCgroup, type RunCgroup } from '../sandbox/cgroup.js';
import { gpuBinding, visibleIds, type GpuBinding } from '../sandbox/gpu-binding.js';
import { nodePrefix, nulSeparated, setprivTo, SYSTEM_DIRS, withTraversableParents } from '../sandbox/sandbox.js';
import { noNewUserNamespacesFilter } from '../sandbox/seccomp.js';
import { freePort } from './free-port.js';
import { bindable, commandBinds, isWithin, serverEnv, type BindPolicy } from './server-view.js';

/**
 * Servers a2rl starts that load what the agent made (the model server on a submitted checkpoint)
 * or answer what it sends (environment servers) run confined as the agent is (docs/security.md,
 * "What each server can reach"): bwrap, a uid of their own (root harness) with no capabilities and
 * no_new_privs, no new user namespaces, private pid/IPC/UTS/cgroup/network namespaces, the system
 * directories, their command's installation and the checkpoint read-only, a private /tmp, an
 * allowlisted environment, a process limit for their uid and a memory cgroup. Their one way out is
 * the port they serve: inside, `server-bridge.mjs` listens on a Unix socket in a directory bound for
 * it and pipes to the server's loopback port; the harness adopts that socket (moves it where the
 * server cannot reach, so it can never be swapped for a link) and serves it on a loopback port of
 * the host. Without bubblewrap the server runs as before, with the allowlisted environment only
 * (loud warning; `sandbox: 'none'` in its isolation record).
 */

/** Limits and extra reach of started servers (serving.config.ts: A2RL_SERVER_*). */
export interface ServerConfinementConfig {
  /** Memory of the server's whole process tree (cgroup), null: not limited. */
  memoryBytes: number | null;
  /** Processes and threads of the server's uid (RLIMIT_NPROC). */
  maxProcesses: number;
  /** Harness variables passed by name besides the allowlist (A2RL_SERVER_ENV). */
  passEnv: string[];
  /** Host directories bound read-only besides what the command names (A2RL_SERVER_BINDS). */
  binds: string[];
  /** Host directories bound read-write (A2RL_SERVER_WRITABLE): the operator makes them writable for servers' uids. */
  writable: string[];
}

/** How a started server was confined: returned with it and recorded in the grading's details. */
export interface ServerIsolation {
  sandbox: 'bwrap' | 'none';
  mode: IsolationMode;
  /** The server's uid; null when it runs as the harness's. */
  uid: number | null;
  /** `namespace`: loopback of its own, only its port bridged out; `host`: the host's network. */
  network: 'namespace' | 'host';
  /** Host paths it sees read-only besides the system directories (checkpoint first). */
  readOnly: string[];
  /** Host directories it may write (A2RL_SERVER_WRITABLE). */
  writable: string[];
  /** Names of the variables of its environment. */
  env: string[];
  maxProcesses: number | null;
  memoryBytes: number | null;
  memoryEnforced: boolean;
  /** For a model server: the engine that served (vLLM, the CPU engine, the operator's command), with what it reported of itself. */
  engine?: ServedEngine;
}

/** The inference engine of one grading: a2rl's choice, the grading device, and the server's own word (GET /v1/models). */
export interface ServedEngine {
  kind: 'vllm' | 'transformers' | 'custom';
  device: string;
  /** What the server says it is: the CPU engine's `engine`, `transformers`, `torch`, `device`; vLLM's `owned_by`; null when it says nothing. */
  reported: Record<string, string> | null;
}

export interface ConfineRequest {
  /** "the model server", for messages. */
  what: string;
  /** The rendered command, given the port it is to listen on (loopback). */
  command: (port: number) => string[];
  /** Checkpoint directories, bound read-only at their own paths. */
  checkpoints: string[];
  /** The server's own variables (its bearer token), set last. */
  env?: Record<string, string>;
  /** Harness variables this server needs by name (ALFWORLD_DATA); absolute paths they name are bound. */
  passEnv?: string[];
  /** 'cpu' or GPU ids in CUDA_VISIBLE_DEVICES form: only those GPUs' device nodes are bound. */
  device: string;
  config: ServerConfinementConfig;
  /** Default: this process's. */
  hostEnv?: NodeJS.ProcessEnv;
  plan?: SandboxPlan;
}

/** A confined launch: what to spawn (fds 3, 4… fed with `fds`), the host port clients use, and the clean-up once it is gone. */
export interface ConfinedLaunch {
  /** The server's command as configured (for messages). */
  argv: string[];
  file: string;
  args: string[];
  fds: Buffer[];
  /** The spawn's own environment (the sandbox's is on fd 3). */
  spawnEnv: NodeJS.ProcessEnv;
  /** The loopback port of the host clients connect to; `{port}` of the command. */
  port: number;
  isolation: ServerIsolation;
  /** After the server's processes are gone: closes the port, removes the socket directory and the cgroup. */
  close(): Promise<{ oomKills: number }>;
  /** What to remove if the harness dies without close(): the socket directory, the cgroup's directory. */
  leftovers: string[];
}

/** Servers' uids (root harness): one per start, apart from the agents' (100000–159999). */
const FIRST_SERVER_UID = 160_000;
const SERVER_UIDS = 60_000;
/** Where the bridge and its socket directory appear inside. */
const INSIDE_BRIDGE = '/run/a2rl-server-bridge.mjs';
const INSIDE_SOCKET_DIR = '/run/a2rl-server';
const SOCKET_NAME = 'server.sock';
/**
 * The sandbox's first step, in a shell as root: SIGTERM, SIGINT and SIGHUP are ignored from here on
 * (bwrap inherits it), so that stopping the group reaches the server while bwrap, whose exit would
 * kill the whole sandbox at once, waits for it; node (the bridge) restores them. Then the memory
 * cgroup is entered before anything forks (`-`: none).
 */
const ENTER = 'trap "" TERM INT HUP; [ "$0" = - ] || echo $$ > "$0" || exit 125; exec "$@"';

let warned = false;

/** A2RL_HOME as the CLI resolves it (src/config/config.ts): never bound into a server. */
export function harnessHome(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env.A2RL_HOME?.trim() || './.a2rl');
}

export async function confineServer(req: ConfineRequest): Promise<ConfinedLaunch> {
  const hostEnv = req.hostEnv ?? process.env;
  const plan = req.plan ?? sandboxPlan();
  const gpus = serverGpus(plan, req.device, hostEnv);
  const env = serverEnv(hostEnv, [...req.config.passEnv, ...(req.passEnv ?? [])], { ...cudaEnv(gpus, req.device, hostEnv), ...req.env });
  if (plan.mode === 'none') return unconfined(req, env);
  const uid = plan.mode === 'setuid' ? FIRST_SERVER_UID + randomInt(SERVER_UIDS) : plan.capabilities.harnessUid;
  const owner = plan.mode === 'setuid' ? uid : null;
  // The host port is known once its listener is open; inside its own namespace the server listens on the same number.
  const access = await serveSocketLater();
  let dirs: SocketDirs | null = null;
  let cgroup: RunCgroup | null = null;
  try {
    const argv = req.command(access.port);
    const checkpoints = [...new Set(req.checkpoints.map((c) => path.resolve(c)))];
    if (owner !== null) for (const dir of checkpoints) await letOthersRead(dir);
    const policy = { home: harnessHome(hostEnv) };
    const binds = serverBinds(argv, env, req, checkpoints, policy);
    const writable = req.config.writable.filter((w) => bindable(w, policy) && !checkpoints.some((c) => isWithin(w, c) || isWithin(c, w)));
    dirs = await socketDirs(owner);
    access.connect(path.join(dirs.own, SOCKET_NAME), path.join(dirs.held, SOCKET_NAME), owner);
    cgroup = req.config.memoryBytes === null ? null : await createRunCgroup(`server-${uid}-${randomBytes(4).toString('hex')}`, req.config.memoryBytes);
    const fds = [nulSeparated(bwrapOptions(plan, uid, env, { binds, writable, checkpoints, socketDir: dirs.own }, gpus))];
    const filter = plan.mode === 'setuid' ? noNewUserNamespacesFilter() : null;
    if (filter) fds.push(filter);
    const bridge = [realpathSync(process.execPath), INSIDE_BRIDGE, '--socket', path.posix.join(INSIDE_SOCKET_DIR, SOCKET_NAME), '--port', String(access.port), '--'];
    const inner = [...(owner !== null ? setprivTo(owner) : []), ...bridge, ...argv];
    const limits = plan.capabilities.prlimit ? ['prlimit', `--nproc=${req.config.maxProcesses}`, '--'] : [];
    const outer = ['sh', '-c', ENTER, cgroup?.procs ?? '-', ...limits, 'bwrap', '--args', '3', ...(filter ? ['--seccomp', '4'] : []), '--', ...inner];
    const [base, group] = [dirs.base, cgroup];
    return {
      leftovers: [base, ...(group ? [path.dirname(group.procs)] : [])],
      argv,
      file: outer[0]!,
      args: outer.slice(1),
      fds,
      spawnEnv: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
      port: access.port,
      isolation: {
        sandbox: 'bwrap',
        mode: plan.mode,
        uid: owner,
        network: 'namespace',
        readOnly: [...checkpoints, ...binds],
        writable,
        env: Object.keys(env).sort(),
        maxProcesses: limits.length ? req.config.maxProcesses : null,
        memoryBytes: req.config.memoryBytes,
        memoryEnforced: group !== null,
      },
      close: async () => {
        await access.close();
        await rm(base, { recursive: true, force: true });
        if (group) await emptied(group.procs);
        return { oomKills: (await group?.close())?.oomKills ?? 0 };
      },
    };
  } catch (err) {
    await access.close();
    await cgroup?.close();
    if (dirs) await rm(dirs.base, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Waits (a few seconds at most) for the cgroup's last processes to be gone: those the kernel kills
 * when the sandbox's pid namespace ends may still be exiting when bwrap has, and a cgroup with
 * processes cannot be removed.
 */
async function emptied(procs: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const left = await readFile(procs, 'utf8').catch(() => '');
    if (!left.trim()) return;
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
}

/** What the command needs read-only besides the checkpoints (which are bound by themselves). */
function serverBinds(argv: string[], env: Record<string, string>, req: ConfineRequest, checkpoints: string[], policy: BindPolicy): string[] {
  const all = [...commandBinds(argv, env, policy), ...req.config.binds.filter((b) => bindable(b, policy)), ...envPathBinds(env, req.passEnv ?? [], policy)];
  const unique = [...new Set(all.map((b) => path.resolve(b)))].filter((b) => !checkpoints.some((c) => isWithin(b, c)));
  // A path inside another bound directory is there already; bound again it is a mount over a link
  // of that directory (a venv's bin/python), which bwrap cannot create.
  return unique.filter((b) => !unique.some((other) => other !== b && isWithin(b, other)));
}

/** Without a sandbox: the command on the host, with the allowlisted environment only. */
async function unconfined(req: ConfineRequest, env: Record<string, string>): Promise<ConfinedLaunch> {
  if (!warned) {
    warned = true;
    process.stderr.write(
      `\nWARNING: ${req.what} runs UNCONFINED: bubblewrap cannot sandbox it on this machine (a2rl doctor --sandbox says why). Servers a2rl starts load agent-written checkpoints as the harness's user, on the host's network and filesystem; only their environment is restricted.\n\n`,
    );
  }
  const port = await freePort();
  const argv = req.command(port);
  return {
    argv,
    file: argv[0]!,
    args: argv.slice(1),
    fds: [],
    spawnEnv: env,
    port,
    isolation: { sandbox: 'none', mode: 'none', uid: null, network: 'host', readOnly: [], writable: [], env: Object.keys(env).sort(), maxProcesses: null, memoryBytes: null, memoryEnforced: false },
    close: async () => ({ oomKills: 0 }),
    leftovers: [],
  };
}

/** The GPUs a server on `device` gets: the grading GPU(s), or on 'cpu' those of the harness (CUDA_VISIBLE_DEVICES, else all). */
function serverGpus(plan: SandboxPlan, device: string, hostEnv: NodeJS.ProcessEnv): GpuBinding {
  const host = { devices: plan.capabilities.gpuDevices, renderNodes: [], libraries: [], binaries: [], ...plan.capabilities.gpuDriver };
  return gpuBinding(host, visibleIds(device === 'cpu' ? hostEnv.CUDA_VISIBLE_DEVICES : device));
}

/** CUDA_VISIBLE_DEVICES as numbered inside; without GPU nodes on this machine, the grading device as given. */
function cudaEnv(gpus: GpuBinding, device: string, hostEnv: NodeJS.ProcessEnv): Record<string, string> {
  if (gpus.visibleDevices !== null) return { CUDA_VISIBLE_DEVICES: gpus.visibleDevices, CUDA_DEVICE_ORDER: 'PCI_BUS_ID' };
  if (device !== 'cpu') return { CUDA_VISIBLE_DEVICES: device };
  return hostEnv.CUDA_VISIBLE_DEVICES !== undefined ? { CUDA_VISIBLE_DEVICES: hostEnv.CUDA_VISIBLE_DEVICES } : {};
}

/** Directories named by the server's own path variables (ALFWORLD_DATA=/data/alfworld). */
function envPathBinds(env: Record<string, string>, names: readonly string[], policy: BindPolicy): string[] {
  return names.flatMap((name) => (env[name] ?? '').split(':')).filter((p) => bindable(p, policy));
}

interface ServerMounts {
  binds: string[];
  writable: string[];
  checkpoints: string[];
  socketDir: string;
}

/**
 * bwrap's options: an empty environment but the server's, the namespaces, a private /tmp, the
 * system directories, node (the bridge) and the command's installation read-only, the configured
 * writable directories, the checkpoint read-only (last: nothing is bound over it), the socket
 * directory read-write, the held GPUs' device nodes and driver files.
 */
function bwrapOptions(plan: SandboxPlan, uid: number, env: Record<string, string>, mounts: ServerMounts, gpus: GpuBinding): string[] {
  const { binds, writable, checkpoints, socketDir } = mounts;
  const options = ['--clearenv'];
  for (const [key, value] of Object.entries(env)) options.push('--setenv', key, value);
  options.push('--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--unshare-net');
  if (plan.mode === 'userns') options.push('--unshare-user', '--disable-userns', '--uid', String(uid), '--gid', String(uid), '--cap-drop', 'ALL');
  options.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--tmpfs', '/tmp');
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    if (lstatSync(dir).isSymbolicLink()) options.push('--symlink', readlinkSync(dir), dir);
    else options.push('--ro-bind', dir, dir);
  }
  const shown = (p: string) => SYSTEM_DIRS.some((sys) => isWithin(p, sys));
  const node = nodePrefix();
  if (!shown(node)) options.push('--ro-bind', node, node);
  for (const dir of binds) if (!shown(dir) && !isWithin(dir, node)) options.push('--ro-bind', dir, dir);
  for (const dir of writable) options.push('--bind', dir, dir);
  for (const dir of checkpoints) options.push('--ro-bind', dir, dir);
  options.push('--ro-bind', bridgeScript(), INSIDE_BRIDGE);
  options.push('--bind', socketDir, INSIDE_SOCKET_DIR);
  for (const dev of gpus.devices) options.push('--dev-bind', dev, dev);
  for (const file of [...gpus.libraries, ...gpus.binaries]) if (existsSync(file) && !shown(file)) options.push('--ro-bind', file, file);
  if (gpus.devices.length > 0 && existsSync('/sys')) options.push('--ro-bind', '/sys', '/sys');
  options.push('--chdir', '/tmp');
  return withTraversableParents(options);
}

/** The bridge shipped with a2rl (plain JavaScript: it runs inside, without the harness's loader). */
function bridgeScript(): string {
  return path.join(packageRoot(), 'modules', 'serving', 'server-bridge.mjs');
}

/**
 * The socket's directories: `own`, the server's (bound read-write at /run/a2rl-server, owned by its
 * uid), and `held`, the harness's, where the socket is moved once it exists. Both under a private
 * directory of the host's temp dir (mode 0700), on one filesystem so the move is a rename.
 */
interface SocketDirs {
  base: string;
  own: string;
  held: string;
}

async function socketDirs(uid: number | null): Promise<SocketDirs> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'a2rl-server-'));
  const own = path.join(base, 'own');
  const held = path.join(base, 'held');
  await mkdir(own, { mode: 0o700 });
  await mkdir(held, { mode: 0o700 });
  if (uid !== null) await chown(own, uid, uid);
  return { base, own, held };
}

interface HostAccess {
  port: number;
  /** Where the server's bridge will listen (`own`), where the harness keeps it once adopted (`held`), whose it must be. */
  connect(own: string, held: string, uid: number | null): void;
  close(): Promise<void>;
}

/**
 * A loopback port of the host piping each connection to the server's socket. The socket is adopted
 * at the first connection that finds it: moved into the harness's own directory, then checked to
 * be a socket of the server's uid. A socket the server replaced by a link (or anything else) is
 * never connected to: connections are closed, as while the server is not listening yet.
 */
async function serveSocketLater(): Promise<HostAccess> {
  let own = '';
  let held = '';
  let uid: number | null = null;
  let adopted = false;
  const adopt = async (): Promise<boolean> => {
    if (adopted) return true;
    if (!own) return false;
    try {
      await rename(own, held);
    } catch {
      return false; // not there yet
    }
    const st = await lstat(held);
    if (!st.isSocket() || (uid !== null && st.uid !== uid)) {
      await rm(held, { recursive: true, force: true });
      return false;
    }
    adopted = true;
    return true;
  };
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => undefined);
    client.pause();
    adopt().then(
      (ok) => {
        if (!ok || client.destroyed) return void client.destroy();
        const upstream = net.connect(held);
        client.pipe(upstream).pipe(client);
        client.resume();
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
      },
      () => client.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  server.on('error', () => undefined);
  server.unref();
  return {
    port: (server.address() as net.AddressInfo).port,
    connect: (ownPath, heldPath, owner) => {
      [own, held, uid] = [ownPath, heldPath, owner];
    },
    close: async () => {
      for (const client of open) client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The server's uid must read the checkpoint: directories of the harness's own copy (the staged
 * submission, a restored archive: no agent can write there) without read and search for others get
 * them, files without read get it. Links are not followed; what the harness does not own is left alone.
 */
async function letOthersRead(dir: string): Promise<void> {
  const me = process.getuid?.() ?? -1;
  const visit = async (p: string, depth: number): Promise<void> => {
    const st = await lstat(p);
    if (st.isSymbolicLink() || st.uid !== me) return;
    if (st.isDirectory()) {
      if ((st.mode & 0o005) !== 0o005) await chmod(p, (st.mode & 0o7777) | 0o005);
      if (depth < 64) for await (const entry of await opendir(p)) await visit(path.join(p, entry.name), depth + 1);
    } else if (st.isFile() && (st.mode & 0o004) === 0) {
      await chmod(p, (st.mode & 0o7777) | 0o004);
    }
  };
  await visit(dir, 0);
}
