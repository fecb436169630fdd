import { createReadStream } from 'node:fs';
import { chown, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { agentsRoot } from '../../agents/agent-registry.js';
import { agentRuntime, type AgentRuntime } from '../../sandbox/agent-python.js';
import type { SandboxPlan } from '../../sandbox/capabilities.js';
import { createRunCgroup, type RunCgroup } from '../../sandbox/cgroup.js';
import { agentUidFor, SANDBOX_RUN_DIR, sandboxCommand, type SandboxKind } from '../../sandbox/sandbox.js';
import { agentInstructions } from '../instructions.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { prepareWorkspace, type PreparedWorkspace } from '../workspace.js';
import { captureIntegrityBaseline } from '../workspace-integrity.js';
import { IntegrityChecks } from './integrity.js';

/** What `prepare` produced: the workspace, how the agent is sandboxed, and what the run owns on the host. */
export interface Prepared {
  plan: SandboxPlan;
  sandbox: SandboxKind;
  /** The agent's own uid and gid when the harness is root and sandboxes (one per run). */
  agentUid?: number;
  workspace: PreparedWorkspace;
  /** The agent's own home on the host (HOME inside: SANDBOX_HOME), archived at the end (LLM-driven agents only). */
  home?: string;
  /** The cgroup enforcing the memory limit, where this machine allows one. */
  cgroup?: RunCgroup;
  integrity: IntegrityChecks;
  /** The agent's Python and packages. */
  runtime: AgentRuntime;
}

/** RunScheduled, then the lock that makes this process the run's one writer. */
export async function schedule(deps: RunDeps, s: RunSession): Promise<void> {
  const { request, task, spec, driver } = s;
  await s.record('RunScheduled', {
    task: task.id,
    agent: spec.id,
    ...(driver ? { driver } : {}),
    baseModel: task.baseModel,
    budgetSeconds: request.budgetSeconds,
    seed: request.seed,
    mode: request.mode ?? 'free',
    ...(request.campaign ? { campaign: { ...request.campaign } } : {}),
  });
  deps.locks.write({ runId: s.runId, pid: process.pid });
  await request.onScheduled?.(s.runId);
}

/**
 * The workspace (data and base model given, archived), the sandbox's plan, the agent's home and the
 * memory cgroup (its disposer records the limit's outcome): WorkspacePrepared.
 */
export async function prepare(deps: RunDeps, s: RunSession): Promise<Prepared> {
  const { plan, sandbox, agentUid } = sandboxFor(deps, s);
  const workspace = await prepareWorkspace(workspaceOptions(deps, s, sandbox, agentUid));
  const home = s.spec.llm ? await createAgentHome(deps, s.runId, agentUid) : undefined;
  const integrity = new IntegrityChecks(s, workspace.layout, workspace.dataManifest, await captureIntegrityBaseline(workspace.layout, workspace.dataManifest), sandbox);
  // Everything given to the agent is archived too (content-addressed, so once per task in
  // practice): replay and audit bundles can then restore data/ and models/ exactly.
  for (const file of workspace.dataManifest) {
    await deps.artifacts.put(createReadStream(path.join(workspace.layout.root, file.path)), { sha256: file.sha256, size: file.size });
  }
  const runtime = agentRuntime({ env: deps.env, task: s.task.id, interactive: !!s.task.environment, gpus: s.request.gpus });
  const { mounts, devices } = sandboxCommand({ kind: sandbox, plan, workspace: workspace.layout, agentDir: agentsRoot(), runDir: workspace.runDir, binds: s.commands.binds, home, runtime, command: ['true'], env: {} });
  const cgroup = sandbox === 'bwrap' && s.limits.memoryBytes !== null ? ((await createRunCgroup(s.runId, s.limits.memoryBytes)) ?? undefined) : undefined;
  if (cgroup) s.stack.defer(() => closeCgroup(deps, s, cgroup));
  await s.record('WorkspacePrepared', {
    workspace: workspace.layout.root,
    sandbox,
    mounts,
    dataManifest: workspace.dataManifest,
    isolation: {
      mode: plan.mode,
      ...(agentUid !== undefined ? { uid: agentUid } : {}),
      network: sandbox === 'bwrap' ? 'bridged' : 'host',
      allowNet: s.request.allowNet ?? [],
      limits: { ...s.limits },
      memoryEnforced: cgroup !== undefined,
      ...(devices?.length ? { devices } : {}),
      ...(runtime.python ? { python: runtime.python.prefix } : {}),
    },
  });
  return { plan, sandbox, agentUid, workspace, home, cgroup, integrity, runtime };
}

export function sandboxFor(deps: RunDeps, s: RunSession): { plan: SandboxPlan; sandbox: SandboxKind; agentUid?: number } {
  const plan = deps.sandboxes();
  const sandbox: SandboxKind = plan.mode === 'none' ? 'none' : 'bwrap';
  if (sandbox === 'none') {
    s.warn('WARNING: bubblewrap (bwrap) cannot sandbox the agent here: the agent runs UNSANDBOXED with access to everything this user can read, including held-out data. Install the "bubblewrap" package; `a2rl doctor` says what is missing.');
  }
  // A root harness gives each run's agent a uid of its own: its process limit and its signals reach no other run.
  const agentUid = sandbox === 'bwrap' && plan.capabilities.harnessUid === 0 ? agentUidFor(s.runId) : undefined;
  return { plan, sandbox, agentUid };
}

export function workspaceOptions(deps: RunDeps, s: RunSession, sandbox: SandboxKind, agentUid: number | undefined): Parameters<typeof prepareWorkspace>[0] {
  const { request, task } = s;
  const { home, workspacesDir } = deps.settings;
  return {
    workspacesRoot: workspacesDir,
    runId: s.runId,
    task,
    taskCacheDir: path.join(home, 'tasks'),
    datasetsDir: path.join(home, 'datasets'),
    instructions: agentInstructions({ task: task.id, baseModel: task.baseModel, budgetSeconds: request.budgetSeconds, interactive: !!task.environment, mode: request.mode }),
    budgetSeconds: request.budgetSeconds,
    runDir: path.join(home, 'runs', s.runId),
    runMetaLink: sandbox === 'bwrap' ? path.posix.join(SANDBOX_RUN_DIR, 'run_meta.json') : undefined,
    agentOwner: agentUid === undefined ? undefined : { uid: agentUid, gid: agentUid },
  };
}

/**
 * A fresh home for the agent's CLI (its config, sessions, caches), outside the workspace: not watched
 * as code, archived once at the end. Owned by the agent's uid when the harness is root.
 */
export async function createAgentHome(deps: RunDeps, runId: string, agentUid: number | undefined): Promise<string> {
  const home = path.join(deps.settings.home, 'agent-homes', runId);
  await mkdir(home, { recursive: true, mode: 0o700 });
  if (agentUid !== undefined) await chown(home, agentUid, agentUid);
  return home;
}

/** The memory limit's outcome: processes the kernel killed for it are a LimitReached. */
export async function closeCgroup(deps: RunDeps, s: RunSession, cgroup: RunCgroup): Promise<void> {
  const report = await cgroup.close();
  if (!report || report.oomKills === 0 || s.limits.memoryBytes === null) return;
  await s.record('LimitReached', {
    limit: 'memoryBytes',
    value: report.peakBytes ?? s.limits.memoryBytes,
    max: s.limits.memoryBytes,
    action: `the kernel killed ${report.oomKills} process(es) of the agent for exceeding the memory limit`,
    observedAt: deps.clock().toISOString(),
  });
}
