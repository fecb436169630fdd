import { readdirSync } from 'node:fs';
import { readSmallProcFile } from './process-monitor.js';

/**
 * Host pids for the pids a clone returns inside a pid namespace (the tracer runs strace without
 * `--pidns-translation`, which scans every process's /proc entry for each new pid).
 *
 * strace prefixes each line with the host pid (its own namespace's) of the process that made it,
 * but clone/fork return the child's pid in the caller's namespace. The state machine needs the
 * child's host pid to tie the child's own lines to its parent (process-tracer-state.ts). How:
 * - A caller in the harness's namespace (level 0): the result is the host pid.
 * - Otherwise the child's host pid H has `NSpid:` in /proc/H/status listing its pid at every level
 *   from the harness's namespace down; entry `level(caller)` is what the clone returned. The child is
 *   looked up when the clone line is read: among processes already seen whose parent is the caller,
 *   then among the caller's children (`/proc/<caller>/task/<tid>/children`; for a thread, the
 *   caller's tasks). A child's real parent is the calling thread until that parent exits, so the
 *   match (parent + NSpid entry) is exact, whatever namespaces nest below.
 * - A child already reaped by then (a fork that exits at once, `( : )`) is no longer listed: the
 *   clone stays *open* until its child's exit line (an unknown host pid, unreadable) pairs with it.
 *   Forks of one calling thread get increasing pids at every level (pids are handed out in order,
 *   one fork after the other), so open clones of ONE caller pair with the unknown exits in order.
 *   Open clones of several callers at once cannot be told apart: that is a gap, never a guess.
 */

export interface PidInfo {
  /** The process (thread group) a thread belongs to; itself for a process. */
  tgid: number;
  /** The real parent's host pid (its thread group), as /proc says now. */
  ppid: number;
  /** `NSpid:` — host pid first, then the pid in each nested namespace; length - 1 is the level. */
  nspid: number[];
}

/** The /proc reads the translation needs; tests pass fakes. */
export interface ProcPids {
  status(tid: number): PidInfo | null;
  /** Children of thread `tid` of process `tgid`; null when it is gone. */
  children(tgid: number, tid: number): number[] | null;
  /** Threads of process `tgid`; null when it is gone. */
  tasks(tgid: number): number[] | null;
}

/** A clone whose child's host pid is not known yet. */
export interface OpenClone {
  caller: number;
  /** The caller's process. */
  leader: number;
  nsPid: number;
  /** The caller's namespace level; undefined when it could not be learnt. */
  level?: number;
  isThread: boolean;
  /** strace's time of the clone line (epoch ms). */
  at: number;
  /** clone3 with explicit pids (`set_tid`): pids not handed out in order. */
  chosenPid: boolean;
}

/** Whether the process/thread described by `info` is the child `clone` created. */
export function isChildOf(info: PidInfo, clone: Pick<OpenClone, 'leader' | 'nsPid' | 'level' | 'isThread'>): boolean {
  if (clone.level === undefined || info.nspid[clone.level] !== clone.nsPid) return false;
  return clone.isThread ? info.tgid === clone.leader : info.ppid === clone.leader;
}

/**
 * Pairs the open clones with the host pids of unknown, already vanished processes, when that is
 * certain: every open clone from one calling thread, as many vanished pids as open clones, pids in
 * order at both levels (one caller's forks follow each other) and no wrap-around. Null otherwise.
 */
export function pairInOrder<C extends OpenClone>(open: C[], vanished: number[]): Array<[C, number]> | null {
  if (open.length === 0 || open.length !== vanished.length) return null;
  if (open.some((c) => c.caller !== open[0].caller || c.chosenPid)) return null;
  // `open` is in the caller's own order (its clone lines): its pids must increase in that order.
  for (let i = 1; i < open.length; i++) if (open[i].nsPid <= open[i - 1].nsPid) return null;
  const hosts = [...vanished].sort((a, b) => a - b);
  // A wrap-around at pid_max would put a later host pid below an earlier one.
  if (hosts[hosts.length - 1] - hosts[0] > MAX_ORDERED_SPAN) return null;
  return open.map((c, i) => [c, hosts[i]]);
}

/**
 * Vanished host pids spanning more than this are not paired in order: pids wrap at pid_max (32768
 * by default), and a set this wide is not one burst of forks anyway.
 */
const MAX_ORDERED_SPAN = 4096;

/** The real /proc. */
export const procPids: ProcPids = {
  status(tid) {
    const text = readSmallProcFile(`/proc/${tid}/status`);
    if (text === null) return null;
    const field = (name: string) => new RegExp(`^${name}:\\s*([\\d\\s]+?)\\s*$`, 'm').exec(text)?.[1];
    const tgid = Number(field('Tgid'));
    const ppid = Number(field('PPid'));
    const nspid = (field('NSpid') ?? '').split(/\s+/).filter(Boolean).map(Number);
    if (!Number.isInteger(tgid) || !Number.isInteger(ppid) || nspid.length === 0) return null;
    return { tgid, ppid, nspid };
  },
  children(tgid, tid) {
    const text = readSmallProcFile(`/proc/${tgid}/task/${tid}/children`);
    return text === null ? null : text.split(' ').filter(Boolean).map(Number);
  },
  tasks(tgid) {
    try {
      return readdirSync(`/proc/${tgid}/task`).map(Number);
    } catch {
      return null;
    }
  },
};
