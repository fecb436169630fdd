import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

/**
 * What a sandbox needs to give an agent the GPUs its run holds: the NVIDIA device nodes (control
 * nodes for any GPU, one `/dev/nvidia<N>` per held GPU, its DRM render node), the driver's user-space
 * libraries and tools, read-only at their host paths. Computed from the host once per process
 * (`probeHostGpus`); everything it reads is injectable so tests describe a GPU machine without one.
 */

/** The host's NVIDIA driver, as far as a sandbox is concerned. */
export interface HostGpus {
  /** `/dev/nvidia*` nodes: control nodes and one per GPU (`/dev/nvidia<minor>`). */
  devices: string[];
  /** DRM render nodes of NVIDIA GPUs, with the GPU's device minor when the driver says it. */
  renderNodes: Array<{ path: string; minor: number | null }>;
  /** Driver libraries (libcuda, libnvidia-*): `nvidia-container-cli list --libraries`, else `ldconfig -p`. */
  libraries: string[];
  /** Driver tools (nvidia-smi). */
  binaries: string[];
}

/** Where `probeHostGpus` looks; the defaults are the machine's own. */
export interface GpuProbeInputs {
  dev?: string;
  /** `/proc/driver/nvidia/gpus`: one directory per GPU (PCI address) with an `information` file. */
  procGpus?: string;
  /** `/sys/class/drm`: render nodes, each with a `device` link to its PCI device. */
  sysDrm?: string;
  /** Runs a command; its stdout, or null when it is missing or fails. */
  run?: (file: string, args: string[]) => string | null;
  /** Searched for the driver's tools (default: PATH). */
  pathDirs?: string[];
}

/** The device nodes every CUDA process opens, whichever GPU it uses. */
const CONTROL_NODES = ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset'];
const GPU_NODE = /^nvidia(\d+)$/;
/** The driver's user-space libraries (not CUDA toolkit libraries such as libcudart, which environments bring). */
const DRIVER_LIBRARY = /^lib(cuda|cudadebugger|nvcuvid|nvoptix|nvidia-[\w.-]+|GLX_nvidia|EGL_nvidia|GLESv1_CM_nvidia|GLESv2_nvidia)\.so[.\d]*$/;
const DRIVER_BINARIES = ['nvidia-smi', 'nvidia-debugdump'];

export function probeHostGpus(inputs: GpuProbeInputs = {}): HostGpus {
  const dev = inputs.dev ?? '/dev';
  const names = listDir(dev);
  const devices = names.filter((n) => CONTROL_NODES.includes(n) || GPU_NODE.test(n)).map((n) => path.join(dev, n)).sort(byGpuOrder);
  if (!devices.some((d) => GPU_NODE.test(path.basename(d)))) return { devices: [], renderNodes: [], libraries: [], binaries: [] };
  const run = inputs.run ?? runCommand;
  return {
    devices,
    renderNodes: renderNodes(path.join(dev, 'dri'), inputs.sysDrm ?? '/sys/class/drm', inputs.procGpus ?? '/proc/driver/nvidia/gpus'),
    libraries: driverLibraries(run),
    binaries: driverBinaries(run, inputs.pathDirs ?? (process.env.PATH ?? '').split(':').filter(Boolean)),
  };
}

/** What one run's sandbox binds, and the CUDA_VISIBLE_DEVICES its agent gets. */
export interface GpuBinding {
  /** Bound with `--dev-bind` (read-write device nodes). */
  devices: string[];
  /** Bound read-only at the same path. */
  libraries: string[];
  binaries: string[];
  /**
   * CUDA_VISIBLE_DEVICES inside, or null with no GPU: only the held GPUs' nodes exist there, so CUDA
   * numbers them 0…k-1 (as in a container); ids that name no node (UUIDs, MIG) are passed as given.
   */
  visibleDevices: string | null;
}

const NO_GPU: GpuBinding = { devices: [], libraries: [], binaries: [], visibleDevices: null };

/**
 * The binding for a run holding `held` (GPU indices as in CUDA_VISIBLE_DEVICES; undefined: every GPU
 * of the host). Numeric ids are device minors (`/dev/nvidia<id>`): only those nodes are bound, so
 * the agent cannot open another run's GPU whatever it sets. Other ids (GPU UUIDs, MIG instances)
 * cannot be mapped to a node without the driver: every GPU node is bound and CUDA_VISIBLE_DEVICES
 * selects (not enforced).
 */
export function gpuBinding(host: HostGpus, held?: readonly string[]): GpuBinding {
  const nodes = new Map(host.devices.flatMap((d) => {
    const m = GPU_NODE.exec(path.basename(d));
    return m ? [[m[1], d] as const] : [];
  }));
  if (nodes.size === 0 || (held !== undefined && held.length === 0)) return NO_GPU;
  const ids = held ?? [...nodes.keys()];
  const mapped = ids.every((id) => nodes.has(id));
  const minors = mapped ? ids : [...nodes.keys()];
  const gpuNodes = [...new Set(minors)].map((id) => nodes.get(id)!);
  const control = host.devices.filter((d) => !GPU_NODE.test(path.basename(d)));
  const render = host.renderNodes.filter((r) => r.minor !== null && minors.includes(String(r.minor))).map((r) => r.path);
  return {
    devices: [...control, ...gpuNodes, ...render],
    libraries: host.libraries,
    binaries: host.binaries,
    visibleDevices: mapped ? ids.map((_, i) => String(i)).join(',') : ids.join(','),
  };
}

/** GPU ids in CUDA_VISIBLE_DEVICES form ("0,2", "GPU-…"), or undefined when unset. */
export function visibleIds(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return value.split(',').map((id) => id.trim()).filter((id) => id !== '');
}

/** Render nodes whose PCI device the NVIDIA driver lists, with that GPU's device minor. */
function renderNodes(dri: string, sysDrm: string, procGpus: string): HostGpus['renderNodes'] {
  const minors = new Map<string, number>();
  for (const bus of listDir(procGpus)) {
    const info = readText(path.join(procGpus, bus, 'information'));
    const minor = info && /^Device Minor:\s*(\d+)/m.exec(info);
    if (minor) minors.set(bus.toLowerCase(), Number(minor[1]));
  }
  return listDir(dri)
    .filter((n) => /^renderD\d+$/.test(n))
    .flatMap((n) => {
      const device = realpathOrNull(path.join(sysDrm, n, 'device'));
      const bus = device ? path.basename(device).toLowerCase() : null;
      return bus && minors.has(bus) ? [{ path: path.join(dri, n), minor: minors.get(bus)! }] : [];
    });
}

function driverLibraries(run: NonNullable<GpuProbeInputs['run']>): string[] {
  const listed = run('nvidia-container-cli', ['list', '--libraries']);
  if (listed !== null) return unique(listed.split('\n').map((l) => l.trim()).filter((l) => path.isAbsolute(l)));
  const cache = run('ldconfig', ['-p']) ?? run('/sbin/ldconfig', ['-p']) ?? '';
  return unique(
    cache.split('\n').flatMap((line) => {
      const m = /^\s*(\S+)\s+\([^)]*\)\s+=>\s+(\/\S+)\s*$/.exec(line);
      return m && DRIVER_LIBRARY.test(m[1]) ? [m[2]] : [];
    }),
  );
}

function driverBinaries(run: NonNullable<GpuProbeInputs['run']>, pathDirs: string[]): string[] {
  const listed = run('nvidia-container-cli', ['list', '--binaries']);
  if (listed !== null) return unique(listed.split('\n').map((l) => l.trim()).filter((l) => path.isAbsolute(l)));
  return DRIVER_BINARIES.flatMap((name) => {
    const dir = pathDirs.find((d) => existsSync(path.join(d, name)));
    return dir ? [path.join(dir, name)] : [];
  });
}

function runCommand(file: string, args: string[]): string | null {
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] });
  return r.error === undefined && r.status === 0 ? r.stdout : null;
}

/** Control nodes first, then GPUs by minor. */
function byGpuOrder(a: string, b: string): number {
  const minor = (p: string) => Number(GPU_NODE.exec(path.basename(p))?.[1] ?? -1);
  return minor(a) - minor(b) || (a < b ? -1 : a > b ? 1 : 0);
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function realpathOrNull(p: string): string | null {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}
