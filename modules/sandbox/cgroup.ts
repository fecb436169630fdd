import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The run's memory limit, enforced by the kernel on the agent's whole process tree through a cgroup of
 * its own: cgroup v2 (a sibling of the harness's cgroup, so the "no internal processes" rule holds) or
 * the v1 memory hierarchy (a child of the harness's). Used where this process may create cgroups (root,
 * or a delegated subtree); elsewhere the memory limit is reported as not enforced.
 */
export interface RunCgroup {
  /** The file the sandbox's first process writes its pid into (see CGROUP_ENTER). */
  readonly procs: string;
  /** How the run fared against its limit; removes the cgroup (its processes are gone by then). */
  close(): Promise<CgroupReport>;
}

export interface CgroupReport {
  /** Processes the kernel killed for exceeding the limit. */
  oomKills: number;
  /** Highest memory use seen, where the kernel keeps it. */
  peakBytes?: number;
}

interface Hierarchy {
  version: 1 | 2;
  /** Directory under which run cgroups are created. */
  parent: string;
}

/** The shell step that moves the sandbox's first process into the run's cgroup before anything forks. */
export const CGROUP_ENTER = 'echo $$ > "$0" && exec "$@"';

let probed: Hierarchy | null | undefined;

/** Where run cgroups with a memory controller can be made here, or null. */
export function memoryCgroupSupport(): Hierarchy | null {
  probed ??= findHierarchy();
  return probed;
}

function findHierarchy(): Hierarchy | null {
  let own: string;
  try {
    own = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  const v2 = /^0::(\/.*)$/m.exec(own)?.[1];
  const v2Mount = ['/sys/fs/cgroup', '/sys/fs/cgroup/unified'].find((m) => existsSync(path.join(m, 'cgroup.controllers')));
  if (v2 !== undefined && v2Mount) {
    const mine = path.join(v2Mount, v2);
    const controllers = readOr(path.join(mine, 'cgroup.controllers'));
    if (controllers.split(/\s+/).includes('memory')) return { version: 2, parent: v2 === '/' ? mine : path.dirname(mine) };
  }
  const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\/.*)$/m.exec(own)?.[1];
  if (v1 !== undefined && existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) return { version: 1, parent: path.join('/sys/fs/cgroup/memory', v1) };
  return null;
}

/** A cgroup limiting the run to `memoryBytes`, or null where cgroups cannot be made (nothing is enforced then). */
export async function createRunCgroup(runId: string, memoryBytes: number): Promise<RunCgroup | null> {
  const hierarchy = memoryCgroupSupport();
  if (!hierarchy) return null;
  const dir = path.join(hierarchy.parent, `a2rl-${runId}`);
  try {
    await mkdir(dir);
    if (hierarchy.version === 2) {
      await writeFile(path.join(dir, 'memory.max'), String(memoryBytes));
      await writeFile(path.join(dir, 'memory.swap.max'), '0').catch(() => undefined); // no swap escape where swap is accounted
    } else {
      await writeFile(path.join(dir, 'memory.limit_in_bytes'), String(memoryBytes));
    }
  } catch {
    await rmdir(dir).catch(() => undefined);
    return null;
  }
  return {
    procs: path.join(dir, 'cgroup.procs'),
    close: async () => {
      const report = hierarchy.version === 2 ? await reportV2(dir) : await reportV1(dir);
      await rmdir(dir).catch(() => undefined); // a leftover process keeps it; the next boot clears it
      return report;
    },
  };
}

async function reportV2(dir: string): Promise<CgroupReport> {
  const events = await readFile(path.join(dir, 'memory.events'), 'utf8').catch(() => '');
  const peak = Number((await readFile(path.join(dir, 'memory.peak'), 'utf8').catch(() => '')).trim());
  return { oomKills: Number(/^oom_kill (\d+)$/m.exec(events)?.[1] ?? 0), ...(peak > 0 ? { peakBytes: peak } : {}) };
}

async function reportV1(dir: string): Promise<CgroupReport> {
  const control = await readFile(path.join(dir, 'memory.oom_control'), 'utf8').catch(() => '');
  const peak = Number((await readFile(path.join(dir, 'memory.max_usage_in_bytes'), 'utf8').catch(() => '')).trim());
  return { oomKills: Number(/^oom_kill (\d+)$/m.exec(control)?.[1] ?? 0), ...(peak > 0 ? { peakBytes: peak } : {}) };
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
