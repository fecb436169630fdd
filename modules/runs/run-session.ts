import type { TaskPack } from '../../tasks/task-pack.js';
import { adHocAgent, checkAgent, detectDriver, loadAgent, resolveCommand, type AgentSpec } from '../agents/agent-registry.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { BaselineCache } from '../grading/baseline-cache.js';
import type { GradingSockets } from '../grading/grading-sockets.js';
import type { RunRegistry } from '../grading/run-registry.js';
import { knownSecrets, MIN_SECRET_LENGTH, type KnownSecret } from '../instrumentation/secret-redactor.js';
import type { LedgerService } from '../ledger/ledger.service.js';
import type { RunLocks } from '../ledger/run-locks.port.js';
import type { Clock } from '../ledger/tokens.js';
import { upstreamsFromEnv } from '../llm-gateway/upstreams.js';
import { PAPER_LIMITS, REFERENCE_LIMITS, type RunLimits } from '../sandbox/limits.js';
import type { Settings } from '../settings/settings.port.js';
import { workspaceLayout } from '../workspace-fs/layout.js';
import { DisposalStack } from './disposal-stack.js';
import type { RunControl } from './run-control.js';
import type { AgentLauncher, Diagnostics, Environment, RunIds, SandboxPlanner, TaskCatalog } from './run.ports.js';
import type { RunRequest } from './run.types.js';
import { openWritePath, signingKey, type WritePath } from './write-path.js';

/** What the run pipeline's steps are given (RunService's injected ports). */
export interface RunDeps {
  settings: Settings;
  ledger: LedgerService;
  artifacts: ArtifactStore;
  registry: RunRegistry;
  baselines: BaselineCache;
  clock: Clock;
  ids: RunIds;
  locks: RunLocks;
  launcher: AgentLauncher;
  tasks: TaskCatalog;
  sandboxes: SandboxPlanner;
  gradingSockets: GradingSockets;
  operatorToken: string;
  env: Environment;
  diagnostics: Diagnostics;
  control: RunControl;
}

/** One run from its opening: who runs what, under which limits, and its write path. Nothing here is optional. */
export interface RunSession extends WritePath {
  runId: string;
  task: TaskPack;
  spec: AgentSpec;
  driver: string | null;
  request: RunRequest;
  warn: (message: string) => void;
  limits: RunLimits;
  /** Host directories the agent's commands need in the sandbox, and where they are on its PATH. */
  commands: { binds: string[]; binDirs: string[] };
  /** What the steps started, undone in reverse at teardown. */
  stack: DisposalStack;
  /** This launch of the agent: the budget it is given, the agent time earlier segments used, and how it resumes. */
  segment: Segment;
}

/** One launch of a run's agent: the first, or one after a resume (docs/resume.md). */
export interface Segment {
  /** 1 for the first launch, n + 1 after n resumes. */
  number: number;
  /** Wall-clock budget of this launch: the run's budget, less what earlier segments used. */
  budgetSeconds: number;
  /** Agent time earlier segments used (0 for the first). */
  usedSeconds: number;
  /** For a resumed run: the note the agent is given, and whether its CLI continues its own session. */
  resume?: { note: string; submissions: number; llmSpent: { tokens: number; costUsd: number } };
}

/** A run being resumed: its id and stored stream (the write path continues it), and its segment. */
export interface Reopened {
  runId: string;
  resumeFrom: NonNullable<Parameters<typeof openWritePath>[0]['resumeFrom']>;
  segment: Segment;
}

/** Fails before anything is recorded when the agent is unknown or cannot run here. */
export function resolveAgent(request: Pick<RunRequest, 'agent' | 'agentCommand'>): AgentSpec {
  if (request.agentCommand !== undefined) {
    if (request.agent) throw new Error('give either --agent or --agent-command, not both');
    if (!request.agentCommand.trim()) throw new Error('--agent-command is empty');
    return adHocAgent(request.agentCommand);
  }
  const spec = loadAgent(request.agent ?? 'reference');
  const { missing } = checkAgent(spec);
  if (missing.length) throw new Error(`agent "${spec.id}" cannot run on this machine; missing: ${missing.join('; ')}`);
  return spec;
}

/** Resolves task, agent and driver (throws before anything is recorded) and wires the run's write path. */
export function openSession(deps: RunDeps, request: RunRequest, reopened?: Reopened): RunSession {
  const task = deps.tasks(request.task);
  const spec = resolveAgent(request);
  const driver = reopened ? (request.driver ?? null) : (detectDriver(request.driver, spec) ?? null);
  const warn = request.warn ?? ((m: string) => deps.diagnostics.warn(m));
  const runId = reopened?.runId ?? deps.ids.runId(task.id, deps.clock());
  const key = signingKey(deps.settings.home, warn);
  const root = workspaceLayout(deps.settings.workspacesDir, runId, task.baseModel).root;
  const limits: RunLimits = { ...(task.reference ? REFERENCE_LIMITS : PAPER_LIMITS), ...task.limits, ...request.limits };
  // Every credential the harness knows is redacted from events and archived files (the run and gateway tokens are added once drawn).
  const secrets = [...knownSecrets({ env: deps.env }), ...upstreamKeys(deps.env), { kind: 'operator-token', value: deps.operatorToken }];
  const onLimit = () => stopForLimit(deps, runId, warn);
  const writePath = openWritePath({ runId, ledger: deps.ledger, key, treeHeadEvery: deps.settings.treeHeadEvery, root, artifacts: deps.artifacts, clock: deps.clock, limits, secrets, onLimit, resumeFrom: reopened?.resumeFrom });
  const segment = reopened?.segment ?? { number: 1, budgetSeconds: request.budgetSeconds, usedSeconds: 0 };
  return { runId, task, spec, driver, request, warn, limits, commands: agentCommands(spec), stack: new DisposalStack(), segment, ...writePath };
}

/** Stops the agent when a limit the harness accounts (the disk quota) is exceeded; LimitReached says which. */
function stopForLimit(deps: RunDeps, runId: string, warn: (message: string) => void): void {
  warn(`[${runId}] a resource limit was reached: stopping the agent (see LimitReached in a2rl events ${runId})`);
  void deps.control.stop(runId, 'limit');
}

/** The agent's commands as found here (the project's pinned CLIs first): what the sandbox binds, and the PATH entries. */
function agentCommands(spec: AgentSpec): RunSession['commands'] {
  const found = (spec.requires.commands ?? []).map((name) => resolveCommand(name)).filter((c) => c !== null);
  return { binds: [...new Set(found.flatMap((c) => c.binds))], binDirs: [...new Set(found.map((c) => c.binDir))] };
}

/** The LLM gateway's upstream keys (A2RL_LLM_<PROVIDER>_KEY): never in an event or an archived file. */
function upstreamKeys(env: Environment): KnownSecret[] {
  return Object.entries(upstreamsFromEnv(env))
    .flatMap(([provider, upstream]) => (upstream ? [{ kind: `llm-upstream-key:${provider}`, value: upstream.key }] : []))
    .filter((secret) => secret.value.length >= MIN_SECRET_LENGTH);
}
