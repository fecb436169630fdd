import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import { AgentPythonInstallError, cachePath, installOnce, readInstallMarker, run, type InstallOptions } from './agent-python-env.js';

/**
 * A Python newer than the machine's, for the agent systems that need one (OpenHands needs ≥ 3.12; the
 * machines a2rl is built on have 3.11). No registry a2rl reaches ships a relocatable CPython, so this
 * takes Debian 13's own binaries: apt downloads `python3.13` and everything it depends on (glibc
 * included) from the suite's signed index into a private apt state, each package is unpacked into one
 * root in the machine cache, and the interpreter is pointed at that root's loader and libraries
 * (the host's patchelf). The host's apt and dpkg state are never touched. Configuration: infra/python-agents/portable-python.json.
 */
export interface PortablePythonSpec {
  mirror: string;
  suite: string;
  keyring: string;
  python: string;
  packages: string[];
}

/** What the marker records once an install completed (written last: its presence means complete). */
export interface PortablePythonInstall {
  key: string;
  /** The interpreter, e.g. <root>/usr/bin/python3.13. */
  python: string;
  version: string;
  suite: string;
  /** Every unpacked package and its version, as apt chose them from the signed index. */
  packages: Record<string, string>;
}

const MARKER = 'a2rl-portable-python.json';

export function portablePythonSpecFile(): string {
  return path.join(packageRoot(), 'infra', 'python-agents', 'portable-python.json');
}

export function portablePythonSpec(file = portablePythonSpecFile()): PortablePythonSpec {
  return JSON.parse(readFileSync(file, 'utf8')) as PortablePythonSpec;
}

/** The key of the install: the hash of its specification. */
export function portablePythonKey(file = portablePythonSpecFile()): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16);
}

export function portablePythonRoot(env: NodeJS.ProcessEnv, key = portablePythonKey()): string | null {
  return cachePath(env, 'portable-python', key);
}

export function readPortablePython(root: string, key: string): PortablePythonInstall | null {
  return readInstallMarker<PortablePythonInstall>(path.join(root, MARKER), key, (install) => existsSync(install.python));
}

/** The installed interpreter's path (…/usr/bin/python3.13), or null when it is not installed. */
export function installedPortablePython(env: NodeJS.ProcessEnv = process.env): string | null {
  try {
    const key = portablePythonKey();
    const root = portablePythonRoot(env, key);
    return root ? readPortablePython(root, key)?.python ?? null : null;
  } catch {
    return null;
  }
}

/** The root a portable interpreter lives in (what a sandbox must show for it to run), or null for another file. */
export function portablePythonRootOf(python: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const root = portablePythonRoot(env);
  return root && python.startsWith(`${root}/`) ? root : null;
}

/** Unpacks the portable Python unless it is there; returns the interpreter's path. One installer at a time per machine. */
export async function installPortablePython(opts: InstallOptions = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const spec = portablePythonSpec();
  const key = portablePythonKey();
  const root = portablePythonRoot(env, key);
  if (!root) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  const ready = () => (opts.force ? null : readPortablePython(root, key));
  const there = ready();
  if (there) {
    log(`the portable Python ${there.version} is already installed in ${root}`);
    return there.python;
  }
  return (await installOnce(root, ready, () => unpack(spec, root, key, env, log), log)).python;
}

async function unpack(spec: PortablePythonSpec, root: string, key: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<PortablePythonInstall> {
  for (const tool of ['apt-get', 'dpkg-deb', 'patchelf']) {
    if (spawnSync(tool, ['--version'], { stdio: 'ignore' }).status !== 0) throw new AgentPythonInstallError(`${tool} is not on PATH: the portable Python is unpacked from Debian packages and relinked with patchelf (Debian packages apt, dpkg, patchelf)`);
  }
  if (!existsSync(spec.keyring)) throw new AgentPythonInstallError(`${spec.keyring} is missing (Debian package debian-archive-keyring): apt could not check the packages`);
  log(`unpacking Python ${spec.python} from Debian ${spec.suite} (${spec.packages.join(', ')}) into ${root} …`);
  rmSync(root, { recursive: true, force: true });
  const apt = `${root}.apt`;
  rmSync(apt, { recursive: true, force: true });
  try {
    const debs = await download(spec, apt, env, log);
    const packages: Record<string, string> = {};
    for (const deb of debs) {
      const [name, version] = spawnSync('dpkg-deb', ['-f', deb, 'Package', 'Version'], { encoding: 'utf8' }).stdout.trim().split('\n').map((l) => l.replace(/^\S+:\s*/, ''));
      packages[name] = version;
      await run('dpkg-deb', ['-x', deb, root], env, log);
    }
    const python = path.join(root, 'usr', 'bin', `python${spec.python}`);
    relink(root, python, env);
    const version = probe(python, env);
    const install: PortablePythonInstall = { key, python, version, suite: spec.suite, packages };
    writeFileSync(path.join(root, MARKER), `${JSON.stringify(install, null, 2)}\n`);
    log(`the portable Python ${version} is ready: ${python} (${Object.keys(packages).length} Debian packages)`);
    return install;
  } finally {
    rmSync(apt, { recursive: true, force: true });
  }
}

/** apt, on a private state and source list: the packages and their dependencies, verified against the suite's signed index. */
async function download(spec: PortablePythonSpec, apt: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<string[]> {
  for (const dir of ['lists/partial', 'archives/partial', 'etc/sources.list.d', 'etc/preferences.d']) mkdirSync(path.join(apt, dir), { recursive: true });
  writeFileSync(path.join(apt, 'status'), '');
  writeFileSync(path.join(apt, 'etc', 'sources.list'), `deb [signed-by=${spec.keyring}] ${spec.mirror} ${spec.suite} main\n`);
  const conf = path.join(apt, 'apt.conf');
  writeFileSync(conf, [
    `Dir::State "${apt}";`, `Dir::State::status "${apt}/status";`, `Dir::Cache "${apt}";`,
    `Dir::Etc::SourceList "${apt}/etc/sources.list";`, `Dir::Etc::SourceParts "${apt}/etc/sources.list.d";`,
    `Dir::Etc::Preferences "${apt}/etc/preferences";`, `Dir::Etc::PreferencesParts "${apt}/etc/preferences.d";`,
    // Only downloaded, never installed: no lock on the host's dpkg state is needed.
    'APT::Architecture "amd64";', 'Debug::NoLocking "true";', '',
  ].join('\n'));
  const aptEnv = { ...env, APT_CONFIG: conf, DEBIAN_FRONTEND: 'noninteractive' };
  await run('apt-get', ['-q', 'update'], aptEnv, log);
  await run('apt-get', ['-q', '-y', '--download-only', '--no-install-recommends', 'install', ...spec.packages], aptEnv, log);
  const archives = path.join(apt, 'archives');
  return readdirSync(archives).filter((f) => f.endsWith('.deb')).sort().map((f) => path.join(archives, f));
}

/**
 * The interpreter runs with the root's own loader and libraries (DT_RPATH also covers the extension
 * modules it loads). The host's patchelf (Debian 12's 0.14) does it; Debian 13's 0.18 leaves this
 * binary crashing at start.
 */
function relink(root: string, python: string, env: NodeJS.ProcessEnv): void {
  const libs = path.join(root, 'usr', 'lib', 'x86_64-linux-gnu');
  const loader = path.join(libs, 'ld-linux-x86-64.so.2');
  const out = spawnSync('patchelf', ['--set-interpreter', loader, '--force-rpath', '--set-rpath', libs, python], { encoding: 'utf8', env });
  if (out.status !== 0) throw new AgentPythonInstallError(`patchelf could not relink ${python}: ${(out.stderr || out.error?.message || '').trim().split('\n').pop()}`);
}

const PROBE = 'import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, hashlib, venv, json; print("%d.%d.%d" % sys.version_info[:3])';

function probe(python: string, env: NodeJS.ProcessEnv): string {
  const out = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', env, timeout: 60_000 });
  if (out.status !== 0) throw new AgentPythonInstallError(`the unpacked Python does not start: ${(out.stderr || out.error?.message || '').trim().split('\n').pop()}`);
  return out.stdout.trim();
}

/** A bare venv from the portable interpreter, with pip from the suite's own wheel (its ensurepip looks under /usr). */
export async function portableVenv(python: string, prefix: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  await run(python, ['-m', 'venv', '--without-pip', prefix], env, log);
  const wheels = path.join(path.dirname(path.dirname(python)), 'share', 'python-wheels');
  const pipWheel = readdirSync(wheels).find((f) => /^pip-.*\.whl$/.test(f));
  if (!pipWheel) throw new AgentPythonInstallError(`no pip wheel in ${wheels}`);
  const wheel = path.join(wheels, pipWheel);
  await run(path.join(prefix, 'bin', 'python'), [path.join(wheel, 'pip'), 'install', '--no-index', '--disable-pip-version-check', '-q', wheel], env, log);
}
