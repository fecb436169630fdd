import { readFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { readAllStats, readProcStat } from '../instrumentation/process-monitor.js';

// The agent's process group file: written at launch (unsandboxed runs), read after a harness crash
// to kill what is left of that agent, removed on a clean exit.

/** Sends `signal`; a process already gone is not an error. */
export function tryKill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone (ESRCH).
  }
}

interface PidFileContent {
  bootId: string;
  pgid: number;
  /** Start time (ticks since boot) of the group leader; every member started at or after it. */
  startTicks: number;
}

export async function writePidFile(path: string, pgid: number, pid: number): Promise<void> {
  const content: PidFileContent = { bootId: bootId(), pgid, startTicks: readProcStat(pid)?.startTicks ?? 0 };
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(content));
  await rename(temp, path);
}

/**
 * After a harness crash: SIGKILLs what is left of the agent process group recorded in `pidFile`
 * (members of the group and their descendants, started no earlier than the recorded leader, on the
 * same boot), then removes the file. Returns how many processes were signalled. A descendant that
 * left the group with setsid AND lost its parent cannot be attributed anymore and is not found.
 */
export async function killLeftoverProcessGroup(pidFile: string): Promise<number> {
  let content: PidFileContent;
  try {
    content = JSON.parse(readFileSync(pidFile, 'utf8')) as PidFileContent;
  } catch {
    return 0; // no file (clean previous exit) or a torn write: nothing we can attribute
  }
  let killed = 0;
  if (content.bootId === bootId()) {
    const all = readAllStats();
    const doomed = new Set<number>();
    for (const st of all.values()) {
      if (st.pgid === content.pgid && st.startTicks >= content.startTicks) doomed.add(st.pid);
    }
    for (let grew = true; grew; ) {
      grew = false;
      for (const st of all.values()) {
        if (!doomed.has(st.pid) && doomed.has(st.ppid)) {
          doomed.add(st.pid);
          grew = true;
        }
      }
    }
    for (const pid of doomed) {
      if (all.get(pid)?.state === 'Z') continue;
      tryKill(pid, 'SIGKILL');
      killed++;
    }
  }
  await rm(pidFile, { force: true });
  return killed;
}

function bootId(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
}
