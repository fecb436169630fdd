import { createReadStream } from 'node:fs';
import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { materializeTask } from '../../grading/task-cache.js';
import { agentRuntime } from '../../sandbox/agent-python.js';
import { createRunCgroup } from '../../sandbox/cgroup.js';
import { workspaceLayout, WorkspaceError, type ManifestEntry } from '../../workspace-fs/layout.js';
import { restoreAgentHome } from '../agent-home.js';
import { ResumeRefusedError, type ResumePlan } from '../resume-plan.js';
import { compareWithLedger, readAgentFile, restoreAgentFiles, type FileDifference } from '../resume-workspace.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { prepareWorkspace, RunMeta, type PreparedWorkspace } from '../workspace.js';
import { captureIntegrityBaseline } from '../workspace-integrity.js';
import { IntegrityChecks } from './integrity.js';
import { closeCgroup, createAgentHome, sandboxFor, workspaceOptions, type Prepared } from './prepare.js';
import type { EventData } from '../../ledger/events/catalog.js';

/** At most this many paths are named in RunResumed (the counts are whole). */
const NAMED_PATHS = 100;

/**
 * The resumed run's `prepare` (docs/resume.md): the lock taken; the workspace found and checked
 * against the ledger (each difference recorded as FileChanged before the agent restarts) or, gone,
 * prepared afresh and its agent files restored from the artifact store; the task's data and base
 * model prepared as at the start and checked against WorkspacePrepared; the agent's home found or
 * restored from its last archive; RunResumed recorded, then a rejection for each submission whose
 * grading the harness's loss cut short.
 */
export async function reopen(deps: RunDeps, s: RunSession, plan: ResumePlan): Promise<Prepared> {
  deps.locks.write({ runId: s.runId, pid: process.pid, segment: s.segment.number });
  const { plan: sandboxPlan, sandbox, agentUid } = sandboxFor(deps, s);
  const owner = agentUid === undefined ? undefined : { uid: agentUid, gid: agentUid };
  const found = await workspaceOnDisk(deps, s);
  const workspace = found ? await reopenWorkspace(deps, s, sandbox, agentUid) : await prepareWorkspace(workspaceOptions(deps, s, sandbox, agentUid));
  checkGivenFiles(s.runId, plan.prepared.dataManifest, workspace.dataManifest);
  const differences = found ? await compareWithLedger(workspace.layout.root, plan.files) : [];
  const restored = found ? { restored: 0, unrestorable: [] } : await restoreAgentFiles(workspace.layout.root, plan.files, deps.artifacts, owner);
  const homeState = s.spec.llm ? await reopenHome(deps, s, plan, agentUid) : { home: undefined, state: 'none' as const };
  const integrity = new IntegrityChecks(s, workspace.layout, workspace.dataManifest, await captureIntegrityBaseline(workspace.layout, workspace.dataManifest), sandbox);
  for (const file of workspace.dataManifest) {
    await deps.artifacts.put(createReadStream(path.join(workspace.layout.root, file.path)), { sha256: file.sha256, size: file.size });
  }
  const runtime = agentRuntime({ env: deps.env, task: s.task.id, interactive: !!s.task.environment, gpus: s.request.gpus });
  const cgroup = sandbox === 'bwrap' && s.limits.memoryBytes !== null ? ((await createRunCgroup(s.runId, s.limits.memoryBytes)) ?? undefined) : undefined;
  if (cgroup) s.stack.defer(() => closeCgroup(deps, s, cgroup));

  await s.record('RunResumed', resumedFacts(plan, s, found, differences, restored, homeState.state));
  await recordDifferences(deps, s, workspace.layout.root, differences);
  for (const submissionId of plan.pending) {
    await s.record('SubmissionRejected', { submissionId, reasonClass: 'infra_error', message: 'the harness was lost while this submission was being graded; submit it again' });
  }
  if (found) await integrity.atResume(); // data/ and models/ as the resumed agent will find them, every file re-hashed
  return { plan: sandboxPlan, sandbox, agentUid, workspace, home: homeState.home, cgroup, integrity, runtime };
}

async function workspaceOnDisk(deps: RunDeps, s: RunSession): Promise<boolean> {
  const root = workspaceLayout(deps.settings.workspacesDir, s.runId, s.task.baseModel).root;
  const st = await lstat(root).catch(() => null);
  if (st && !st.isDirectory()) throw new ResumeRefusedError(`run ${s.runId} cannot be resumed: ${root} is not a directory`);
  return st !== null;
}

/** The workspace still on disk, with what `prepareWorkspace` would have given: the task pack's held-out data, run_meta.json in the run directory. */
async function reopenWorkspace(deps: RunDeps, s: RunSession, sandbox: Prepared['sandbox'], agentUid: number | undefined): Promise<PreparedWorkspace> {
  const opts = workspaceOptions(deps, s, sandbox, agentUid);
  const layout = workspaceLayout(opts.workspacesRoot, s.runId, s.task.baseModel);
  const pack = await materializeTask(s.task, opts.taskCacheDir, opts.datasetsDir);
  const runDir = opts.runDir ?? path.join(opts.workspacesRoot, `.${s.runId}.run`);
  await mkdir(runDir, { recursive: true, mode: 0o750 });
  const runMeta = await RunMeta.create(path.join(runDir, 'run_meta.json'), { timeout_s: s.request.budgetSeconds });
  if (!(await lstat(layout.runMetaFile).catch(() => null))) {
    throw new WorkspaceError(`workspace ${layout.root} has lost its run_meta.json link: move it away to rebuild it from the ledger`);
  }
  return { layout, privateDir: pack.privateDir, dataManifest: pack.manifest, runMeta, runDir, cacheKey: pack.cacheKey };
}

/** The task's data and base model must be what the run was given: a task pack changed since is refused. */
function checkGivenFiles(runId: string, recorded: readonly ManifestEntry[], now: readonly ManifestEntry[]): void {
  const key = (files: readonly ManifestEntry[]) => files.map((f) => `${f.path}\0${f.sha256}`).sort().join('\n');
  if (key(recorded) !== key(now)) {
    throw new ResumeRefusedError(`run ${runId} cannot be resumed: the task's data or base model is not what the run was given (WorkspacePrepared's manifest differs)`);
  }
}

/** The agent's home: still on disk, restored from its archives (another machine), or made afresh. */
async function reopenHome(deps: RunDeps, s: RunSession, plan: ResumePlan, agentUid: number | undefined): Promise<{ home: string; state: 'on-disk' | 'restored' | 'none' }> {
  const home = path.join(deps.settings.home, 'agent-homes', s.runId);
  if (await lstat(home).catch(() => null)) return { home, state: 'on-disk' };
  await createAgentHome(deps, s.runId, agentUid);
  if (!plan.homeArchived || plan.home.length === 0) return { home, state: 'none' };
  await restoreAgentHome(home, plan.home, deps.artifacts, agentUid);
  return { home, state: 'restored' };
}

function resumedFacts(
  plan: ResumePlan,
  s: RunSession,
  found: boolean,
  differences: FileDifference[],
  restored: { restored: number; unrestorable: string[] },
  home: 'on-disk' | 'restored' | 'none',
): EventData<'RunResumed'> {
  return {
    interruptedSeq: plan.interruptedSeq,
    lastFactSeq: plan.lastFact.seq,
    lastFactAt: plan.lastFact.at,
    agentSecondsUsed: plan.agentSecondsUsed,
    budgetSecondsLeft: plan.budgetSecondsLeft,
    workspace: {
      source: found ? 'on-disk' : 'rebuilt',
      differences: differences.length,
      differing: differences.slice(0, NAMED_PATHS).map((d) => d.path),
      unrestorable: restored.unrestorable.length,
      unrestorablePaths: restored.unrestorable.slice(0, NAMED_PATHS),
      restored: restored.restored,
    },
    agentHome: home,
    session: s.spec.session === 'resumable' && home !== 'none' ? 'continued' : 'restarted',
    ...(plan.pending.length ? { abandonedSubmissions: plan.pending.slice(0, NAMED_PATHS) } : {}),
  };
}

/** Each difference found on disk recorded as the file observer would have: its content archived where it can be read. */
async function recordDifferences(deps: RunDeps, s: RunSession, root: string, differences: FileDifference[]): Promise<void> {
  const observedAt = deps.clock().toISOString();
  for (const d of differences) {
    let key: string | undefined;
    if (d.op !== 'delete' && d.sha256 && d.size !== undefined && d.size <= s.limits.fileBytes) {
      const body = await readAgentFile(root, d.path, s.limits.fileBytes);
      if (body) key = (await s.instrumentation.store.put(body, { sha256: d.sha256, size: body.length })).key;
    }
    await s.record('FileChanged', {
      path: d.path,
      op: d.op,
      ...(d.sha256 ? { sha256: d.sha256 } : {}),
      ...(d.size !== undefined ? { size: d.size } : {}),
      ...(d.previousSha256 ? { previousSha256: d.previousSha256 } : {}),
      ...(key ? { key } : {}),
      observedAt,
    });
  }
}

