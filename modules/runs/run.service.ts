import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chown, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import type { TaskPack } from '../../tasks/task-pack.js';
import { adHocAgent, agentLlmSetup, agentsRoot, checkAgent, detectDriver, loadAgent, resolveCommand, type AgentSpec } from '../agents/agent-registry.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { TreeHeadSigner } from '../ledger/tree-head-signer.js';
import { initSigningKey, keysDir, loadSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { BaselineCache } from '../grading/baseline-cache.js';
import { repeatBaseline } from '../grading/baseline-repeats.js';
import { baseModelHash } from '../grading/cache-key.js';
import { GradingSockets } from '../grading/grading-sockets.js';
import { OPERATOR_TOKEN } from '../grading/grading.options.js';
import { RunRegistry } from '../grading/run-registry.js';
import { Instrumentation } from '../instrumentation/instrumentation.js';
import { knownSecrets, MIN_SECRET_LENGTH, type KnownSecret } from '../instrumentation/secret-redactor.js';
import { startLlmGateway } from '../llm-gateway/gateway.js';
import { upstreamsFromEnv } from '../llm-gateway/upstreams.js';
import { RunRecorder } from '../instrumentation/run-recorder.js';
import type { AgentStopper, EventData, EventType } from '../ledger/events/catalog.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { CLOCK, type Clock } from '../ledger/tokens.js';
import { createEvaluationContext } from '../serving/model-server.js';
import { loadServingConfig } from '../serving/serving.config.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import type { AgentExit, AgentHandle } from './agent-process.js';
import { archiveAgentHome, writeAgentHomeFiles } from './agent-home.js';
import { agentInstructions, type RunMode } from './instructions.js';
import { captureIntegrityBaseline, integrityAtEnd, integrityBeforeGrading, type IntegrityBaseline } from './workspace-integrity.js';
import type { RunContext } from '../run-context/run-context.js';
import { AGENT_LAUNCHER, RUN_IDS, SANDBOX_PLANNER, TASK_CATALOG, type AgentLauncher, type RunIds, type SandboxPlanner, type TaskCatalog } from './run.ports.js';
import { RUN_LOCKS, type RunLock, type RunLocks } from '../ledger/run-locks.port.js';
import { runGuard, type RunGuard, type RunState } from '../ledger/run-lifecycle.js';
import { startEgressProxy } from '../sandbox/egress-proxy.js';
import { agentRuntime, runtimeEnv } from '../sandbox/agent-python.js';
import type { SandboxPlan } from '../sandbox/capabilities.js';
import { createRunCgroup, type RunCgroup } from '../sandbox/cgroup.js';
import { openLifeline } from '../sandbox/lifeline.js';
import { restrictSocket } from '../sandbox/unix-socket.js';
import { PAPER_LIMITS, REFERENCE_LIMITS, type RunLimits } from '../sandbox/limits.js';
import { agentUidFor, SANDBOX_AGENT_DIR, SANDBOX_HOME, SANDBOX_PORTS, SANDBOX_RUN_DIR, sandboxCommand, type SandboxForward, type SandboxKind } from '../sandbox/sandbox.js';
import { epochSeconds, prepareWorkspace, type PreparedWorkspace } from './workspace.js';
import { workspaceLayout } from '../workspace-fs/layout.js';
import { POLLER_LIMITS } from '../instrumentation/process-monitor.js';

export type { RunMode } from './instructions.js';

export interface RunRequest {
  task: string;
  /** An agent folder under modules/agents/ … */
  agent?: string;
  /** … or an ad-hoc shell command run with `bash -c` in the workspace. */
  agentCommand?: string;
  driver?: string;
  budgetSeconds: number;
  seed: number;
  mode?: RunMode;
  /** Base URL the grading API listens on (http://127.0.0.1:<port>). */
  gradingBaseUrl: string;
  /** SIGTERM → SIGKILL grace at budget expiry. */
  graceMs?: number;
  onProgress?: (progress: RunProgress) => void;
  /** Overrides of the task's resource limits (`a2rl run --limit name=value`). */
  limits?: Partial<RunLimits>;
  /** Hosts the agent may reach through the egress proxy (`--allow-net`); default none. */
  allowNet?: string[];
  /** Where to say the run is unsandboxed; defaults to stderr. */
  warn?: (message: string) => void;
  /** The campaign job this run is an attempt of (recorded in RunScheduled). */
  campaign?: { id: string; cell: number; attempt: number };
  /** Called once RunScheduled is recorded, before anything else; a throw fails the run's set-up. */
  onScheduled?: (runId: string) => Promise<void>;
  /** Grade the baseline afresh instead of taking it from the cache (a campaign measuring the noise floor). */
  freshBaseline?: boolean;
  /** Grade the base model this many times in all (≥ 2: the extra gradings are GradingRepeated events, the task's noise floor). */
  baselineRepeats?: number;
  /** GPU ids this run holds on its worker: the agent's CUDA_VISIBLE_DEVICES. */
  gpus?: string[];
}

/** How a run stored in the ledger ended, as a campaign needs it (see RunService.settleRun). */
export interface RunOutcome {
  state: 'completed' | 'interrupted';
  best: number | null;
  baseline: number | null;
  /** Whether this call recorded the RunInterrupted (the run had been left open). */
  interruptedNow: boolean;
}

export interface RunProgress {
  runId: string;
  task: string;
  elapsedS: number;
  remainingS: number;
  submissions: number;
  best: number | null;
  baseline: number;
}

export interface RunSummary {
  runId: string;
  task: string;
  agent: string;
  driver: string | null;
  baseline: number;
  best: number | null;
  improvement: number | null;
  submissions: number;
  /** How the run ended, as its events say (run-lifecycle): completed, or cancelled when the operator or a campaign stopped the agent. */
  state: RunState | null;
  exitReason: string;
  sandbox: SandboxKind;
  workspace: string;
}

/** One run in progress: what its steps produce, and what its teardown has to undo. */
interface RunSession {
  runId: string;
  task: TaskPack;
  spec: AgentSpec;
  driver: string | null;
  request: RunRequest;
  warn: (message: string) => void;
  recorder: RunRecorder;
  /** The lifecycle rules the recorder applies; its state is the run's as recorded so far. */
  guard: RunGuard;
  signer: TreeHeadSigner;
  instrumentation: Instrumentation;
  lock: RunLock;
  tally: { submissions: Set<string>; best: number | null };
  prepared?: PreparedWorkspace;
  sandbox?: SandboxKind;
  plan?: SandboxPlan;
  /** The agent's own uid and gid when the harness is root and sandboxes (one per run). */
  agentUid?: number;
  limits: RunLimits;
  /** What the harness serves into the sandbox (grading socket, egress proxy), closed at teardown. */
  endpoints: Array<{ close(): Promise<void> }>;
  forwards: SandboxForward[];
  /** The cgroup enforcing the memory limit, where this machine allows one. */
  cgroup?: RunCgroup;
  /** data/ and models/ as last checked (stat baseline for the next check). */
  integrity?: IntegrityBaseline;
  /** Model serving and environment servers for the baseline grading and the run's environment. */
  evaluation?: ReturnType<typeof createEvaluationContext>;
  /** The capability token of the run's grading API. */
  token?: string;
  baseline?: number;
  registered?: boolean;
  /** Host directories the agent's commands need in the sandbox, and where they are on its PATH. */
  commands: { binds: string[]; binDirs: string[] };
  /** The agent's own home on the host (HOME inside: SANDBOX_HOME), archived at the end. */
  home?: string;
  /** The LLM gateway's base URL as the agent sees it, and the token it holds (LLM-driven agents only). */
  gateway?: { url: string; token: string };
  /** The agent launch was tried and failed: the agent's (crashed) exit, not a setup failure. */
  launchFailed?: boolean;
  agent?: AgentHandle;
  exit?: AgentExit;
}

/**
 * Runs one benchmark run end to end as a short script of named steps — open the session (schedule),
 * prepare the workspace, grade the baseline, start the observers, launch the agent, wait for its
 * exit or the budget — and one teardown for every outcome (completed, budget, crash, operator
 * interrupt, set-up failure): stop what was started, flush the observers, close and seal the run.
 */
@Injectable()
export class RunService {
  /** Agents of the runs in progress, by run id (what an operator interrupt stops). */
  private readonly agents = new Map<string, AgentHandle>();
  /** Who asked to stop a run's agent (the first to ask): recorded as AgentExited.stoppedBy. */
  private readonly stoppers = new Map<string, AgentStopper>();
  private interrupted = false;

  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly ledger: LedgerService,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    private readonly registry: RunRegistry,
    private readonly baselines: BaselineCache,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(RUN_IDS) private readonly ids: RunIds,
    @Inject(RUN_LOCKS) private readonly locks: RunLocks,
    @Inject(AGENT_LAUNCHER) private readonly launcher: AgentLauncher,
    @Inject(TASK_CATALOG) private readonly tasks: TaskCatalog,
    @Inject(SANDBOX_PLANNER) private readonly sandboxes: SandboxPlanner,
    private readonly gradingSockets: GradingSockets,
    @Inject(OPERATOR_TOKEN) private readonly operatorToken: string,
  ) {}

  /** Fails before anything is recorded when the task or agent is unknown or the agent cannot run here. */
  resolveAgent(request: Pick<RunRequest, 'agent' | 'agentCommand'>): AgentSpec {
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

  /**
   * Operator interrupt (Ctrl-C): every running agent is stopped as at budget expiry (SIGTERM, grace,
   * SIGKILL; `AgentExited.reason` "killed") and its run then closes as usual: gradings in flight
   * finish, rollouts are flushed, environment servers stopped, the run sealed. No new run starts.
   */
  async interruptAll(): Promise<void> {
    this.interrupted = true;
    for (const runId of this.agents.keys()) this.stopBy(runId, 'operator');
    await Promise.all([...this.agents.values()].map((agent) => agent.kill('killed')));
  }

  /** Remembers who stops a run's agent; the first to ask is the stopper. */
  private stopBy(runId: string, stopper: AgentStopper): void {
    if (!this.stoppers.has(runId)) this.stoppers.set(runId, stopper);
  }

  /** Stops one run's agent for its campaign, as at budget expiry; the run then closes as usual (cancelled). False when it is not running here. */
  async stop(runId: string): Promise<boolean> {
    const agent = this.agents.get(runId);
    if (!agent) return false;
    this.stopBy(runId, 'campaign');
    await agent.kill('killed');
    return true;
  }

  /**
   * How a stored run ended. A run left open by a harness that is gone (a worker that died; the caller
   * knows it is gone) is recorded interrupted and sealed first. Its lock, if on this machine, is removed.
   */
  async settleRun(runId: string, reason: string): Promise<RunOutcome> {
    let best: number | null = null;
    let baseline: number | null = null;
    let state: RunOutcome['state'] | null = null;
    for await (const event of this.ledger.events(runId)) {
      if (event.type === 'SubmissionGraded') best = Math.max(best ?? -Infinity, event.data.score);
      if (event.type === 'BaselineEvaluated') baseline = event.data.score;
      if (event.type === 'RunCompleted') state = 'completed';
      if (event.type === 'RunInterrupted') state = 'interrupted';
      if (event.type === 'RunResumed') state = null;
    }
    if (state !== null) return { state, best, baseline, interruptedNow: false };
    const lock = this.locks.list().find((l) => l.runId === runId);
    if (lock?.pidFile) await this.launcher.killLeftovers(lock.pidFile).catch(() => 0);
    await this.ledger.record(runId, 'RunInterrupted', { reason: reason.slice(0, 4000), cause: 'harness_gone' });
    await this.sealStored(runId);
    if (lock) this.locks.remove(runId);
    return { state: 'interrupted', best, baseline, interruptedNow: true };
  }

  async run(request: RunRequest): Promise<RunSummary> {
    if (this.interrupted) throw new Error('interrupted by the operator: no new run is started');
    const session = this.openSession(request);
    let failure: unknown;
    try {
      await this.schedule(session);
      await this.prepareWorkspace(session);
      await this.gradeBaseline(session);
      await this.startObservers(session);
      await this.launchAgent(session);
      await this.waitForExitOrBudget(session);
    } catch (err) {
      failure = err;
    }
    await this.close(session, failure);
    if (failure !== undefined) throw failure;
    return this.summarize(session);
  }

  /** Resolves task, agent and driver (throws before anything is recorded) and sets up the recorder. */
  private openSession(request: RunRequest): RunSession {
    const task = this.tasks(request.task);
    const spec = this.resolveAgent(request);
    const driver = detectDriver(request.driver, spec) ?? null;
    const warn = request.warn ?? ((m: string) => process.stderr.write(`${m}\n`));
    const runId = this.ids.runId(task.id, this.clock());
    const every = this.settings.treeHeadEvery;
    const signer = new TreeHeadSigner({ runId, key: this.signingKey(warn), append: (data) => this.ledger.record(runId, 'TreeHeadSigned', data), everyEvents: every?.events, everyMs: every?.ms });
    const guard = runGuard();
    const recorder = new RunRecorder({ runId, ledger: this.ledger, append: (append) => signer.record(append), guard });
    const tally = { submissions: new Set<string>(), best: null as number | null };
    recorder.onRecorded((event) => {
      if (event.type === 'SubmissionReceived' || event.type === 'SubmissionRejected' || event.type === 'SubmissionGraded') tally.submissions.add(event.data.submissionId);
      if (event.type === 'SubmissionGraded') tally.best = Math.max(tally.best ?? -Infinity, event.data.score);
    });
    const root = workspaceLayout(this.settings.workspacesDir, runId, task.baseModel).root;
    const limits: RunLimits = { ...(task.reference ? REFERENCE_LIMITS : PAPER_LIMITS), ...task.limits, ...request.limits };
    const commands = this.agentCommands(spec);
    const session = { runId, task, spec, driver, request, warn, recorder, guard, signer, lock: { runId, pid: process.pid }, tally, limits, endpoints: [], forwards: [], commands } as Omit<RunSession, 'instrumentation'>;
    // Every credential the harness knows is redacted from events and archived files (the run and gateway tokens are added once drawn).
    const secrets = [...knownSecrets({ env: process.env }), ...upstreamKeys(), { kind: 'operator-token', value: this.operatorToken }];
    const instrumentation = new Instrumentation({ root, recorder, artifacts: this.artifacts, clock: this.clock, limits, secrets, onLimit: () => this.stopForLimit(session as RunSession) });
    return Object.assign(session, { instrumentation });
  }

  /** The agent's commands as found here (the project's pinned CLIs first): what the sandbox binds, and the PATH entries. */
  private agentCommands(spec: AgentSpec): RunSession['commands'] {
    const found = (spec.requires.commands ?? []).map((name) => resolveCommand(name)).filter((c) => c !== null);
    return { binds: [...new Set(found.flatMap((c) => c.binds))], binDirs: [...new Set(found.map((c) => c.binDir))] };
  }

  /** Everything is recorded through the instrumentation's ordered lane. */
  private record<T extends EventType>(s: RunSession, type: T, data: EventData<T>): Promise<unknown> {
    return s.instrumentation.record(type, data);
  }

  private async schedule(s: RunSession): Promise<void> {
    const { request, task, spec, driver } = s;
    await this.record(s, 'RunScheduled', {
      task: task.id,
      agent: spec.id,
      ...(driver ? { driver } : {}),
      baseModel: task.baseModel,
      budgetSeconds: request.budgetSeconds,
      seed: request.seed,
      mode: request.mode ?? 'free',
      ...(request.campaign ? { campaign: { ...request.campaign } } : {}),
    });
    this.locks.write(s.lock);
    await request.onScheduled?.(s.runId);
  }

  private async prepareWorkspace(s: RunSession): Promise<void> {
    const { request, task } = s;
    const plan = (s.plan = this.sandboxes());
    s.sandbox = plan.mode === 'none' ? 'none' : 'bwrap';
    if (s.sandbox === 'none') {
      s.warn('WARNING: bubblewrap (bwrap) cannot sandbox the agent here: the agent runs UNSANDBOXED with access to everything this user can read, including held-out data. Install the "bubblewrap" package; `a2rl doctor` says what is missing.');
    }
    // A root harness gives each run's agent a uid of its own: its process limit and its signals reach no other run.
    if (s.sandbox === 'bwrap' && plan.capabilities.harnessUid === 0) s.agentUid = agentUidFor(s.runId);
    const prepared = await prepareWorkspace({
      workspacesRoot: this.settings.workspacesDir,
      runId: s.runId,
      task,
      taskCacheDir: path.join(this.settings.home, 'tasks'),
      datasetsDir: path.join(this.settings.home, 'datasets'),
      instructions: agentInstructions({ task: task.id, baseModel: task.baseModel, budgetSeconds: request.budgetSeconds, interactive: !!task.environment, mode: request.mode }),
      budgetSeconds: request.budgetSeconds,
      runDir: path.join(this.settings.home, 'runs', s.runId),
      runMetaLink: s.sandbox === 'bwrap' ? path.posix.join(SANDBOX_RUN_DIR, 'run_meta.json') : undefined,
      agentOwner: s.agentUid === undefined ? undefined : { uid: s.agentUid, gid: s.agentUid },
    });
    s.prepared = prepared;
    if (s.spec.llm) s.home = await this.createAgentHome(s);
    s.integrity = await captureIntegrityBaseline(prepared.layout, prepared.dataManifest);
    // Everything given to the agent is archived too (content-addressed, so once per task in
    // practice): replay and audit bundles can then restore data/ and models/ exactly.
    for (const file of prepared.dataManifest) {
      await this.artifacts.put(createReadStream(path.join(prepared.layout.root, file.path)), { sha256: file.sha256, size: file.size });
    }
    const runtime = agentRuntime({ env: process.env, task: task.id, interactive: !!task.environment, gpus: request.gpus });
    const { mounts, devices } = sandboxCommand({ kind: s.sandbox, plan, workspace: prepared.layout, agentDir: agentsRoot(), runDir: prepared.runDir, binds: s.commands.binds, home: s.home, runtime, command: ['true'], env: {} });
    if (s.sandbox === 'bwrap' && s.limits.memoryBytes !== null) s.cgroup = (await createRunCgroup(s.runId, s.limits.memoryBytes)) ?? undefined;
    await this.record(s, 'WorkspacePrepared', {
      workspace: prepared.layout.root,
      sandbox: s.sandbox,
      mounts,
      dataManifest: prepared.dataManifest,
      isolation: {
        mode: plan.mode,
        ...(s.agentUid !== undefined ? { uid: s.agentUid } : {}),
        network: s.sandbox === 'bwrap' ? 'bridged' : 'host',
        allowNet: request.allowNet ?? [],
        limits: { ...s.limits },
        memoryEnforced: s.cgroup !== undefined,
        ...(devices?.length ? { devices } : {}),
        ...(runtime.python ? { python: runtime.python.prefix } : {}),
      },
    });
  }

  /**
   * A fresh home for the agent's CLI (its config, sessions, caches), outside the workspace: not watched
   * as code, archived once at the end. Owned by the agent's uid when the harness is root.
   */
  private async createAgentHome(s: RunSession): Promise<string> {
    const home = path.join(this.settings.home, 'agent-homes', s.runId);
    await mkdir(home, { recursive: true, mode: 0o700 });
    if (s.agentUid !== undefined) await chown(home, s.agentUid, s.agentUid);
    return home;
  }

  private async gradeBaseline(s: RunSession): Promise<void> {
    const { task } = s;
    const prepared = s.prepared!;
    const evaluation = (s.evaluation = createEvaluationContext(loadServingConfig(), 'cpu', {}, { baseModelDir: prepared.layout.baseModelDir }));
    const grade = async () => (await task.evaluate(prepared.layout.baseModelDir, prepared.privateDir, undefined, evaluation)).score;
    const key = { task: task.id, baseModel: task.baseModel, evaluatorVersion: task.evaluatorVersion, baseModelHash: baseModelHash(prepared.dataManifest, task.baseModel), taskKey: prepared.cacheKey };
    const baseline = s.request.freshBaseline ? { score: await grade(), cached: false } : await this.baselines.getOrGrade(key, grade);
    s.baseline = baseline.score;
    await this.record(s, 'BaselineEvaluated', { score: baseline.score, cached: baseline.cached, evaluatorVersion: task.evaluatorVersion });
    await repeatBaseline(s.request.baselineRepeats ?? 1, task, grade, (data) => this.record(s, 'GradingRepeated', data));
  }

  /**
   * Serves the run's grading API (and, with --allow-net, the egress proxy) to the sandbox and starts
   * watching the workspace (its current tree is the baseline).
   */
  private async startObservers(s: RunSession): Promise<void> {
    const prepared = s.prepared!;
    const token = (s.token = this.ids.token());
    s.instrumentation.redaction?.add([{ kind: 'run-token', value: token }]);
    const ctx: RunContext = {
      runId: s.runId,
      task: s.task,
      workspace: prepared.layout,
      privateDir: prepared.privateDir,
      token,
      budgetSeconds: s.request.budgetSeconds,
      record: s.instrumentation.record,
      artifacts: this.artifacts,
      limits: s.limits,
      ...(s.request.gpus ? { gpus: s.request.gpus } : {}),
    };
    s.registered = true;
    this.registry.register(ctx, {
      deadline: new Date(this.clock().getTime() + s.request.budgetSeconds * 1000),
      baselineScore: s.baseline!,
      envContext: s.evaluation,
      onSubmitted: () => void prepared.runMeta.update({ last_submit_time: epochSeconds(this.clock()) }),
      beforeGrading: (submissionId) => this.checkIntegrity(s, submissionId),
      runMeta: () => prepared.runMeta.current,
    });
    if (s.sandbox === 'bwrap') await this.openEndpoints(s);
    if (s.spec.llm) await this.openGateway(s);
    await s.instrumentation.start();
    // After a harness crash the next start kills what is left of this agent (the sandbox's own defences first).
    s.lock.pidFile = this.locks.pidFile(s.runId);
    this.locks.write(s.lock);
  }

  /** The sandbox's only ways out: the run's grading socket and, when hosts are allowed, the egress proxy. */
  private async openEndpoints(s: RunSession): Promise<void> {
    const { runDir } = s.prepared!;
    const owner = s.agentUid === undefined ? undefined : { uid: s.agentUid, gid: s.agentUid };
    s.endpoints.push(await openLifeline(path.join(runDir, 'lifeline.sock'), owner));
    s.endpoints.push(await this.gradingSockets.open(path.join(runDir, 'grading.sock'), s.token!, owner));
    s.forwards.push({ port: SANDBOX_PORTS.grading, socket: 'grading.sock' });
    const allow = s.request.allowNet ?? [];
    if (allow.length > 0) {
      const socket = path.join(runDir, 'egress.sock');
      const proxy = await startEgressProxy({
        listen: { path: socket },
        allow,
        record: (data) => this.record(s, 'EgressConnection', data),
        clock: this.clock,
        onError: (err) => s.warn(`[${s.runId}] egress proxy: ${err instanceof Error ? err.message : String(err)}`),
      });
      s.endpoints.push(proxy);
      await restrictSocket(socket, owner);
      s.forwards.push({ port: SANDBOX_PORTS.egress, socket: 'egress.sock' });
    }
  }

  /**
   * The run's LLM gateway: the agent's one way to its model, every call an LlmCallRecorded. Sandboxed,
   * it is a Unix socket of the run directory bridged to a loopback port; unsandboxed, a loopback port.
   */
  private async openGateway(s: RunSession): Promise<void> {
    const token = this.ids.token();
    s.instrumentation.redaction?.add([{ kind: 'gateway-token', value: token }]);
    const sandboxed = s.sandbox === 'bwrap';
    const socket = path.join(s.prepared!.runDir, 'llm.sock');
    const gateway = await startLlmGateway({
      listen: sandboxed ? { path: socket } : { port: 0, host: '127.0.0.1' },
      token,
      upstreams: upstreamsFromEnv(process.env),
      limits: { maxTokens: s.limits.llmTokens, maxCostUsd: s.limits.llmCostUsd },
      record: (data) => this.record(s, 'LlmCallRecorded', data),
      storeBlob: async (body) => {
        const put = await s.instrumentation.store.put(body, { sha256: sha256Hex(body), size: body.length });
        return { sha256: put.sha256, size: put.size, key: put.key };
      },
      onLimit: (limit, value, max, callId) => void this.record(s, 'LimitReached', { limit, value, max, scope: callId, action: 'billable LLM calls answered 429', observedAt: this.clock().toISOString() }),
      clock: this.clock,
      onError: (err) => s.warn(`[${s.runId}] LLM gateway: ${err instanceof Error ? err.message : String(err)}`),
    });
    s.endpoints.push(gateway);
    if (sandboxed) {
      await restrictSocket(socket, s.agentUid === undefined ? undefined : { gid: s.agentUid });
      s.forwards.push({ port: SANDBOX_PORTS.llm, socket: 'llm.sock' });
      s.gateway = { url: `http://127.0.0.1:${SANDBOX_PORTS.llm}`, token };
    } else {
      s.gateway = { url: gateway.url!, token };
    }
  }

  /**
   * data/ and models/ against WorkspacePrepared: before a grading a stat comparison (re-hashing what
   * changed), at the end every file re-hashed. A check that cannot run is said, never fatal.
   */
  private async checkIntegrity(s: RunSession, submissionId?: string): Promise<void> {
    const { layout, dataManifest } = s.prepared!;
    try {
      const checked = submissionId === undefined ? await integrityAtEnd(layout, dataManifest) : await integrityBeforeGrading(layout, dataManifest, s.integrity, submissionId);
      s.integrity = checked.baseline;
      await this.record(s, 'WorkspaceIntegrityChecked', checked.data);
    } catch (err) {
      s.warn(`[${s.runId}] could not check the integrity of data/ and models/: ${(err as Error).message}`);
    }
  }

  /** The memory limit's outcome: processes the kernel killed for it are a LimitReached. */
  private async closeCgroup(s: RunSession): Promise<void> {
    const cgroup = s.cgroup;
    s.cgroup = undefined;
    const report = await cgroup?.close();
    if (!report || report.oomKills === 0 || s.limits.memoryBytes === null) return;
    await this.record(s, 'LimitReached', {
      limit: 'memoryBytes',
      value: report.peakBytes ?? s.limits.memoryBytes,
      max: s.limits.memoryBytes,
      action: `the kernel killed ${report.oomKills} process(es) of the agent for exceeding the memory limit`,
      observedAt: this.clock().toISOString(),
    });
  }

  /** The agent's home, once, redacted: the CLI's own state is evidence too (sessions, logs), but not code. */
  private async archiveHome(s: RunSession): Promise<void> {
    const archived = await archiveAgentHome(s.home!, s.instrumentation.store, { maxFiles: 2000, maxFileBytes: s.limits.fileBytes });
    await this.record(s, 'AgentHomeArchived', { ...archived, observedAt: this.clock().toISOString() });
  }

  /** Stops the agent when a limit the harness accounts (the disk quota) is exceeded; LimitReached says which. */
  private stopForLimit(s: RunSession): void {
    s.warn(`[${s.runId}] a resource limit was reached: stopping the agent (see LimitReached in a2rl events ${s.runId})`);
    if (s.agent) this.stopBy(s.runId, 'limit');
    void s.agent?.kill('killed');
  }

  private async launchAgent(s: RunSession): Promise<void> {
    const { spec, request, task, driver } = s;
    const prepared = s.prepared!;
    const { layout } = prepared;
    const sandbox = s.sandbox!;
    const token = s.token!;
    const agentDir = spec.dir ? insideSandbox(sandbox, spec.dir) : '';
    // Sandboxed, the grading API is the bridged loopback port and needs no credential: the agent holds no token.
    const grading: Record<string, string> =
      sandbox === 'bwrap'
        ? { GRADING_SERVER_URL: `http://127.0.0.1:${SANDBOX_PORTS.grading}` }
        : { GRADING_SERVER_URL: `${request.gradingBaseUrl}/g/${token}`, A2RL_RUN_TOKEN: token };
    const proxy = `http://127.0.0.1:${SANDBOX_PORTS.egress}`;
    const egress: Record<string, string> = s.forwards.some((f) => f.port === SANDBOX_PORTS.egress) ? { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy } : {};
    const llm = await this.llmSetup(s);
    const runtime = agentRuntime({ env: process.env, task: task.id, interactive: !!task.environment, gpus: request.gpus });
    const env: Record<string, string> = runtimeEnv(runtime, {
      PATH: [...s.commands.binDirs, process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'].join(':'),
      TASK: task.id,
      BASE_MODEL: task.baseModel,
      WORKSPACE: layout.root,
      MODEL_PATH: layout.baseModelDir,
      DATA_PATH: layout.dataDir,
      OUTPUT_DIR: layout.outputDir,
      ...grading,
      ...egress,
      A2RL_AGENT_DIR: agentDir,
      ...(driver ? { LLM_MODEL: driver } : {}),
      ...(request.gpus ? { CUDA_VISIBLE_DEVICES: request.gpus.join(',') } : {}),
      ...(spec.llm ? llm.env : passThroughEnv(spec)),
    });
    const command = spec.dir ? ['bash', path.posix.join(agentDir, 'start.sh')] : ['bash', '-c', request.agentCommand!];
    const sandboxed = sandboxCommand({
      kind: sandbox, plan: s.plan, workspace: layout, agentDir: agentsRoot(), runDir: prepared.runDir,
      agentUid: s.agentUid, command, env, forwards: s.forwards, limits: s.limits, cgroupProcs: s.cgroup?.procs,
      binds: s.commands.binds, home: s.home, runtime,
      lifeline: s.sandbox === 'bwrap' ? 'lifeline.sock' : undefined,
    });
    const output = s.instrumentation.output;
    try {
      s.agent = await this.launcher.launch({
        file: sandboxed.file,
        args: sandboxed.args,
        cwd: layout.root,
        // The sandbox's prelude gets no environment of the harness: the agent could read it from /proc.
        env: sandbox === 'bwrap' ? { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } : env,
        fds: sandboxed.fds,
        budgetMs: request.budgetSeconds * 1000,
        graceMs: request.graceMs,
        onOutput: output.write,
        pidFile: s.lock.pidFile,
        monitor: s.instrumentation.processes,
        execHoldMs: spec.execHoldMs,
      });
    } catch (err) {
      s.launchFailed = true;
      throw err;
    }
    this.agents.set(s.runId, s.agent);
    if (s.agent.tracer === 'proc') s.warn(`WARNING: ${POLLER_LIMITS}. Install strace (\`a2rl doctor\`) so that every program is recorded with what it really ran.`);
    if (this.interrupted) void s.agent.kill('killed'); // the interrupt came while the run was being set up
    await prepared.runMeta.update({ start_time: epochSeconds(s.agent.startedAt), timeout_s: request.budgetSeconds });
    const gateway = spec.llm && s.gateway ? { gateway: { providers: spec.llm.providers, url: s.gateway.url } } : {};
    await this.record(s, 'AgentStarted', { command: spec.dir ? `${spec.id}: ${command.join(' ')}` : request.agentCommand!, pid: s.agent.pid, ...gateway });
  }

  /**
   * An LLM agent's CLI setup from its agent.json: the environment (base URLs, the gateway token as its
   * key, the model) and its config files, written into its home. HOME is that home.
   */
  private async llmSetup(s: RunSession): Promise<{ env: Record<string, string> }> {
    const llm = s.spec.llm;
    if (!llm || !s.gateway || !s.home) return { env: {} };
    const home = s.sandbox === 'bwrap' ? SANDBOX_HOME : s.home;
    const model = s.driver ?? llm.defaultModel;
    const setup = agentLlmSetup(llm, { gateway: s.gateway.url, token: s.gateway.token, model, home, workspace: s.prepared!.layout.root });
    await writeAgentHomeFiles(s.home, setup.files, s.agentUid);
    return { env: { ...setup.env, HOME: home, LLM_MODEL: model } };
  }

  /** The launcher enforces the budget on the whole tree; meanwhile the operator sees progress. */
  private async waitForExitOrBudget(s: RunSession): Promise<void> {
    const agent = s.agent!;
    const ticker = setInterval(() => this.progress(s), 1000);
    try {
      s.exit = await agent.exited;
    } finally {
      clearInterval(ticker);
      this.agents.delete(s.runId);
    }
  }

  /**
   * The one teardown: whatever step the run reached, stop what was started (agent, grading API and
   * environments, observers), record how it ended, and seal. A run whose agent ran (or failed to
   * launch) completes; a run that failed before that is interrupted — never the agent's fault.
   */
  private async close(s: RunSession, failure: unknown): Promise<void> {
    let closeError: unknown;
    const keep = (err: unknown) => void (closeError ??= err);
    if (s.agent && !s.exit) {
      s.exit = await s.agent.kill('killed').catch((): AgentExit => ({ reason: 'crashed' }));
      this.agents.delete(s.runId);
    }
    if (s.registered) await this.registry.unregister(s.runId).catch(keep); // gradings in flight finish, rollouts flushed
    for (const endpoint of s.endpoints.splice(0)) await endpoint.close().catch(keep);
    await s.instrumentation.stop().catch(keep); // final file states, output, process facts
    await this.closeCgroup(s).catch(keep);
    if (s.home && s.agent) await this.archiveHome(s).catch(keep);
    try {
      if (s.exit) {
        const { exitCode, signal, reason, endedAt } = s.exit;
        const observedAt = new Date(endedAt ?? this.clock().getTime()).toISOString();
        // Killed on someone's request (an interrupt during set-up kills the agent at its launch: the operator's).
        const stoppedBy = reason === 'killed' ? (this.stoppers.get(s.runId) ?? (this.interrupted ? 'operator' : undefined)) : undefined;
        await this.record(s, 'AgentExited', { ...(exitCode !== undefined ? { exitCode } : {}), ...(signal !== undefined ? { signal } : {}), reason, observedAt, ...(stoppedBy ? { stoppedBy } : {}) });
        await this.checkIntegrity(s);
        await s.prepared?.runMeta.update({ end_time: epochSeconds(this.clock()) }).catch(keep);
        await this.record(s, 'RunCompleted', { ...(s.tally.best !== null ? { best: s.tally.best } : {}), submissions: s.tally.submissions.size });
      } else if (s.launchFailed) {
        await this.record(s, 'AgentExited', { reason: 'crashed' });
        await this.record(s, 'RunCompleted', { submissions: 0 });
      } else if (failure !== undefined) {
        const message = failure instanceof Error ? failure.message : String(failure);
        await this.record(s, 'RunInterrupted', { reason: `setup failed before the agent started: ${message}`.slice(0, 4000), cause: 'setup_failed' });
      }
      await s.recorder.settle();
      await s.signer.seal(); // the final head covers the whole run
      this.locks.remove(s.runId);
    } catch (err) {
      // The ledger failed: the lock stays, so the next start records the run as interrupted.
      if (failure === undefined) throw err;
    } finally {
      this.stoppers.delete(s.runId);
    }
    if (closeError !== undefined && failure === undefined) throw closeError;
    this.progress(s);
  }

  private progress(s: RunSession): void {
    if (!s.agent || s.baseline === undefined) return;
    const startedAt = s.agent.startedAt.getTime();
    const budgetMs = s.request.budgetSeconds * 1000;
    const now = this.clock().getTime();
    s.request.onProgress?.({
      runId: s.runId,
      task: s.task.id,
      elapsedS: (now - startedAt) / 1000,
      remainingS: Math.max(0, (startedAt + budgetMs - now) / 1000),
      submissions: s.tally.submissions.size,
      best: s.tally.best,
      baseline: s.baseline,
    });
  }

  private summarize(s: RunSession): RunSummary {
    const { best } = s.tally;
    return {
      runId: s.runId,
      task: s.task.id,
      agent: s.spec.id,
      driver: s.driver,
      baseline: s.baseline!,
      best,
      improvement: best === null ? null : round2(best - s.baseline!),
      submissions: s.tally.submissions.size,
      state: s.guard.state.status,
      exitReason: s.exit?.reason ?? 'crashed',
      sandbox: s.sandbox!,
      workspace: s.prepared!.layout.root,
    };
  }

  /**
   * Runs left open by a harness that died: record RunInterrupted (their events up to the crash are
   * all in the ledger) and kill whatever of their agents survived. Returns the interrupted run ids.
   */
  async recoverInterruptedRuns(): Promise<string[]> {
    const interrupted: string[] = [];
    for (const lock of this.locks.list()) {
      if (lock.pid === process.pid || this.launcher.alive(lock.pid)) continue;
      if (lock.pidFile) await this.launcher.killLeftovers(lock.pidFile).catch(() => 0);
      await this.ledger.record(lock.runId, 'RunInterrupted', { reason: `the harness (pid ${lock.pid}) exited while the run was open`, cause: 'harness_gone' });
      await this.sealStored(lock.runId);
      this.locks.remove(lock.runId);
      interrupted.push(lock.runId);
    }
    return interrupted;
  }

  /** Signs a final head over a run's stored stream (nothing else writes to it any more). */
  private async sealStored(runId: string): Promise<void> {
    const events: RecordedEvent[] = [];
    for await (const recorded of this.ledger.stored(runId)) events.push(recorded);
    const append = (data: EventData<'TreeHeadSigned'>) => this.ledger.record(runId, 'TreeHeadSigned', data);
    await TreeHeadSigner.resume({ runId, key: this.signingKey(), append }, events).seal();
  }

  /** The ledger's signing key under A2RL_HOME, created (and announced) on first use. */
  private signingKey(warn: (message: string) => void = (m) => process.stderr.write(`${m}\n`)): SigningKey {
    const existing = loadSigningKey(this.settings.home);
    if (existing) return existing;
    const created = initSigningKey(this.settings.home);
    warn(`created the ledger signing key ${created.keyId} in ${keysDir(this.settings.home)} (a2rl keys show prints its public key)`);
    return created;
  }
}

/** The agent folder as the sandboxed agent sees it. */
function insideSandbox(sandbox: SandboxKind, hostPath: string): string {
  return sandbox === 'bwrap' ? hostPath.replace(agentsRoot(), SANDBOX_AGENT_DIR) : hostPath;
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const sha256Hex = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** The LLM gateway's upstream keys (A2RL_LLM_<PROVIDER>_KEY): never in an event or an archived file. */
function upstreamKeys(): KnownSecret[] {
  return Object.entries(upstreamsFromEnv(process.env))
    .map(([provider, upstream]) => ({ kind: `llm-upstream-key:${provider}`, value: upstream!.key }))
    .filter((secret) => secret.value.length >= MIN_SECRET_LENGTH);
}

/** Credentials external agents need (their declared API keys), passed into the sandbox by name. */
function passThroughEnv(spec: AgentSpec): Record<string, string> {
  const names = [...(spec.requires.env ?? []), ...(spec.requires.anyEnv ?? []), 'LLM_API_KEY', 'LLM_BASE_URL'];
  const out: Record<string, string> = {};
  for (const name of names) if (process.env[name]) out[name] = process.env[name]!;
  return out;
}
