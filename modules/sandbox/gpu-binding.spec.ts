import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { gpuBinding, probeHostGpus, visibleIds, type HostGpus } from './gpu-binding.js';

// A four-GPU machine described by a fake /dev, /proc/driver/nvidia, /sys/class/drm and library list.

const LDCONFIG = [
  '1234 libs found in cache `/etc/ld.so.cache\'',
  '\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1',
  '\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1',
  '\tlibcuda.so (libc6,x86-64) => /opt/nvidia/driver/lib/libcuda.so',
  '\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1',
  '\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12',
  '\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6',
  '\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1',
].join('\n');

let root: string;
const at = (...p: string[]) => path.join(root, ...p);

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'a2rl-gpus-'));
  mkdirSync(at('dev', 'dri'), { recursive: true });
  for (const n of ['nvidia0', 'nvidia1', 'nvidia2', 'nvidia3', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset', 'null', 'nvidia-caps-x']) writeFileSync(at('dev', n), '');
  // Render nodes: 128 → GPU minor 1, 129 → minor 3, 130 → a GPU of another vendor.
  const gpus = { '0000:1a:00.0': 1, '0000:3b:00.0': 3 };
  for (const [bus, minor] of Object.entries(gpus)) {
    mkdirSync(at('proc', bus), { recursive: true });
    writeFileSync(at('proc', bus, 'information'), `Model: \t\t NVIDIA H100\nIRQ:   \t\t 42\nDevice Minor: \t ${minor}\n`);
  }
  for (const [node, bus] of [['renderD128', '0000:1a:00.0'], ['renderD129', '0000:3b:00.0'], ['renderD130', '0000:c1:00.0']]) {
    writeFileSync(at('dev', 'dri', node), '');
    mkdirSync(at('pci', bus), { recursive: true });
    mkdirSync(at('drm', node), { recursive: true });
    symlinkSync(at('pci', bus), at('drm', node, 'device'));
  }
  writeFileSync(at('dev', 'dri', 'card0'), '');
  mkdirSync(at('bin'));
  writeFileSync(at('bin', 'nvidia-smi'), '');
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const ldconfigOnly = (file: string, args: string[]) => (file === 'ldconfig' && args[0] === '-p' ? LDCONFIG : null);
const probe = (run = ldconfigOnly) => probeHostGpus({ dev: at('dev'), procGpus: at('proc'), sysDrm: at('drm'), run, pathDirs: [at('none'), at('bin')] });

describe('the host GPUs a sandbox can bind', () => {
  it('finds the NVIDIA device nodes, the render nodes of NVIDIA GPUs with their minors, the driver libraries and nvidia-smi', () => {
    const host = probe();
    expect(host.devices.map((d) => path.basename(d))).toEqual(['nvidia-modeset', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidiactl', 'nvidia0', 'nvidia1', 'nvidia2', 'nvidia3']);
    expect(host.renderNodes).toEqual([
      { path: at('dev', 'dri', 'renderD128'), minor: 1 },
      { path: at('dev', 'dri', 'renderD129'), minor: 3 },
    ]);
    // The driver's libraries only (not the CUDA toolkit's libcudart, not libc), each once.
    expect(host.libraries).toEqual([
      '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1',
      '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
      '/opt/nvidia/driver/lib/libcuda.so',
      '/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1',
    ]);
    expect(host.binaries).toEqual([at('bin', 'nvidia-smi')]);
  });

  it('prefers nvidia-container-cli for the libraries and tools when it is installed', () => {
    const cli = (file: string, args: string[]) =>
      file === 'nvidia-container-cli' ? (args[1] === '--libraries' ? '/usr/lib64/libcuda.so.550.54\n/usr/lib64/libnvidia-ml.so.550.54\n' : '/usr/bin/nvidia-smi\n') : ldconfigOnly(file, args);
    const host = probe(cli);
    expect(host.libraries).toEqual(['/usr/lib64/libcuda.so.550.54', '/usr/lib64/libnvidia-ml.so.550.54']);
    expect(host.binaries).toEqual(['/usr/bin/nvidia-smi']);
  });

  it('finds nothing on a machine without a GPU node (no driver is asked)', () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'a2rl-nogpu-'));
    try {
      writeFileSync(path.join(empty, 'nvidiactl'), '');
      let asked = 0;
      const host = probeHostGpus({ dev: empty, run: () => (asked++, LDCONFIG) });
      expect(host).toEqual({ devices: [], renderNodes: [], libraries: [], binaries: [] });
      expect(asked).toBe(0);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe('the binding of one run', () => {
  let host: HostGpus;
  beforeAll(() => {
    host = probe();
  });
  const names = (paths: string[]) => paths.map((p) => path.relative(root, p));

  it('binds the control nodes and only the held GPUs (and their render nodes), renumbered for CUDA', () => {
    const b = gpuBinding(host, ['3', '1']);
    expect(names(b.devices)).toEqual(['dev/nvidia-modeset', 'dev/nvidia-uvm', 'dev/nvidia-uvm-tools', 'dev/nvidiactl', 'dev/nvidia3', 'dev/nvidia1', 'dev/dri/renderD128', 'dev/dri/renderD129']);
    expect(b.visibleDevices).toBe('0,1');
    expect(b.libraries).toEqual(host.libraries);
    expect(b.binaries).toEqual([at('bin', 'nvidia-smi')]);
    const one = gpuBinding(host, ['2']);
    expect(names(one.devices).filter((d) => /nvidia\d|render/.test(d))).toEqual(['dev/nvidia2']);
    expect(one.visibleDevices).toBe('0');
  });

  it('binds every GPU when the run holds no particular ones, and none (no driver either) when it holds an empty list', () => {
    const all = gpuBinding(host);
    expect(names(all.devices).filter((d) => /nvidia\d/.test(d))).toEqual(['dev/nvidia0', 'dev/nvidia1', 'dev/nvidia2', 'dev/nvidia3']);
    expect(all.visibleDevices).toBe('0,1,2,3');
    expect(gpuBinding(host, [])).toEqual({ devices: [], libraries: [], binaries: [], visibleDevices: null });
    expect(gpuBinding({ devices: [], renderNodes: [], libraries: ['/x/libcuda.so.1'], binaries: [] }, ['0']).devices).toEqual([]);
  });

  it('passes ids that name no device node (UUIDs, MIG) through to CUDA_VISIBLE_DEVICES with every GPU node bound', () => {
    const b = gpuBinding(host, ['GPU-8f1c2d3e-aaaa-bbbb-cccc-000000000001']);
    expect(names(b.devices).filter((d) => /nvidia\d/.test(d))).toHaveLength(4);
    expect(b.visibleDevices).toBe('GPU-8f1c2d3e-aaaa-bbbb-cccc-000000000001');
  });

  it('reads CUDA_VISIBLE_DEVICES as a list of ids', () => {
    expect(visibleIds(undefined)).toBeUndefined();
    expect(visibleIds('')).toEqual([]);
    expect(visibleIds(' 2, 3 ,')).toEqual(['2', '3']);
  });
});
