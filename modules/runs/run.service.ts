import { randomBytes } from 'node:crypto';
import { createReadStream, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { getTask } from '../../tasks/index.js';
import { A2RL_CONFIG } from '../../src/config/config.module.js';
import type { A2rlConfig } from '../../src/config/config.js';
import { adHocAgent, agentsRoot, checkAgent, detectDriver, loadAgent, type AgentSpec } from '../agents/agent-registry.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { TreeHeadSigner } from '../audit/tree-head-signer.js';
import { initSigningKey, keysDir, loadSigningKey, type SigningKey } from '../audit/tree-head.js';
import { BaselineCache } from '../grading/baseline-cache.js';
import { RunRegistry } from '../grading/run-registry.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { createEvaluationContext } from '../serving/model-server.js';
import { loadServingConfig } from '../serving/serving.config.js';
import { killLeftoverProcessGroup, launchAgent, type AgentHandle } from './agent-process.js';
import { FileWatcher } from '../instrumentation/file-watcher.js';
import { agentInstructions } from './instructions.js';
import { OutputRecorder } from '../instrumentation/output-recorder.js';
import type { Recorder, RunContext } from './run-context.js';
import { detectSandbox, SANDBOX_AGENT_DIR, sandboxCommand, type SandboxKind } from './sandbox.js';
import { epochSeconds, prepareWorkspace } from './workspace.js';

export type RunMode = 'free' | 'sft-only' | 'rl-oriented';

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
  /** Where to say the run is unsandboxed; defaults to stderr. */
  warn?: (message: string) => void;
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
  state: 'completed';
  exitReason: string;
  sandbox: SandboxKind;
  workspace: string;
}

/** Per-run lock file: which harness process owns an open run (for interrupted-run recovery). */
interface RunLock {
  runId: string;
  pid: number;
  pidFile?: string;
}

/**
 * Runs one benchmark run end to end and records everything it sees as events: schedule, prepare
 * the workspace, grade the baseline (cached), serve the grading API, launch the agent in the
 * sandbox with its budget, instrument files/processes/output, and close the run.
 */
@Injectable()
export class RunService {
  constructor(
    @Inject(A2RL_CONFIG) private readonly config: A2rlConfig,
    private readonly ledger: LedgerService,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    private readonly registry: RunRegistry,
    private readonly baselines: BaselineCache,
  ) {}

  private get locksDir(): string {
    return path.join(this.config.home, 'runs');
  }

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

  /** Agents of the runs in progress, by run id (what an operator interrupt stops). */
  private readonly agents = new Map<string, AgentHandle>();
  private interrupted = false;

  /**
   * Operator interrupt (Ctrl-C): every running agent is stopped as at budget expiry (SIGTERM, grace,
   * SIGKILL; `AgentExited.reason` "killed") and its run then closes as usual: gradings in flight
   * finish, rollouts are flushed, environment servers stopped, the run sealed. No new run starts.
   */
  async interruptAll(): Promise<void> {
    this.interrupted = true;
    await Promise.all([...this.agents.values()].map((agent) => agent.kill('killed')));
  }

  async run(request: RunRequest): Promise<RunSummary> {
    if (this.interrupted) throw new Error('interrupted by the operator: no new run is started');
    const task = getTask(request.task);
    const spec = this.resolveAgent(request);
    const driver = detectDriver(request.driver, spec) ?? null;
    const warn = request.warn ?? ((m: string) => process.stderr.write(`${m}\n`));
    const runId = newRunId(task.id);
    const signer = new TreeHeadSigner({ runId, key: this.signingKey(warn), append: (data) => this.ledger.record(runId, 'TreeHeadSigned', data) });

    // Every event goes through here: background recorders (files, processes, output) are tracked so
    // the run closes only after all of them are durable, and submissions update the summary.
    const pending = new Set<Promise<unknown>>();
    let recordError: unknown;
    const tally = { submissions: new Set<string>(), best: null as number | null };
    let files: FileWatcher | undefined;
    const track = <T>(p: Promise<T>): Promise<T> => {
      pending.add(p);
      void p.catch((err: unknown) => (recordError ??= err)).finally(() => pending.delete(p));
      return p;
    };
    // Straight to the ledger, through the signer (which sees every stored event and signs tree
    // heads between appends). The file watcher records this way.
    const direct: Recorder = (type, data) =>
      track(
        signer.record(() => this.ledger.record(runId, type, data)).then((event: A2rlEvent) => {
          if (event.type === 'SubmissionReceived' || event.type === 'SubmissionRejected' || event.type === 'SubmissionGraded') {
            tally.submissions.add(event.data.submissionId);
          }
          if (event.type === 'SubmissionGraded') tally.best = Math.max(tally.best ?? -Infinity, event.data.score);
          return event;
        }),
      );
    // Everything else is recorded in call order. Before a submission, or the launch of a training or
    // evaluation process, the watcher is flushed first, so the code as it stood then is in the
    // ledger ahead of the event: "what code did this submission (or training run) come from" never
    // depends on the watcher's coalescing window.
    let order: Promise<unknown> = Promise.resolve();
    const record: Recorder = (type, data) => {
      const kind = (data as { kind?: string }).kind;
      const settlesCode = type === 'SubmissionReceived' || (type === 'ProcessStarted' && (kind === 'training' || kind === 'evaluation'));
      const p = order.then(async () => {
        if (settlesCode && files) await files.flush();
        return direct(type, data);
      });
      order = p.catch(() => undefined);
      return track(p);
    };
    const settle = async () => {
      while (pending.size) await Promise.allSettled([...pending]);
      if (recordError) throw recordError;
    };

    await record('RunScheduled', {
      task: task.id,
      agent: spec.id,
      ...(driver ? { driver } : {}),
      baseModel: task.baseModel,
      budgetSeconds: request.budgetSeconds,
      seed: request.seed,
      mode: request.mode ?? 'free',
    });
    const lock: RunLock = { runId, pid: process.pid };
    this.writeLock(lock);

    // A failure before the agent starts (dataset missing, baseline grading or model server down,
    // disk full) closes the run as interrupted — never the agent's fault — sealed and unlocked.
    let launched = false;
    let closed = false;
    let registered = false;
    try {
      const prepared = await prepareWorkspace({
        workspacesRoot: this.config.workspacesDir,
        runId,
        task,
        taskCacheDir: path.join(this.config.home, 'tasks'),
        datasetsDir: path.join(this.config.home, 'datasets'),
        instructions: agentInstructions({ task: task.id, baseModel: task.baseModel, budgetSeconds: request.budgetSeconds, interactive: !!task.environment, mode: request.mode }),
        budgetSeconds: request.budgetSeconds,
      });
      const { layout } = prepared;
      const sandbox = detectSandbox();
      if (sandbox === 'none') {
        warn('WARNING: bubblewrap (bwrap) is not available: the agent runs UNSANDBOXED with access to everything this user can read, including held-out data. Install the "bubblewrap" package.');
      }
      const token = randomBytes(24).toString('base64url');
      const inside = (hostPath: string) => (sandbox === 'bwrap' ? hostPath.replace(agentsRoot(), SANDBOX_AGENT_DIR) : hostPath);
      const agentDir = spec.dir ? inside(spec.dir) : '';
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
        TASK: task.id,
        BASE_MODEL: task.baseModel,
        WORKSPACE: layout.root,
        MODEL_PATH: layout.baseModelDir,
        DATA_PATH: layout.dataDir,
        OUTPUT_DIR: layout.outputDir,
        GRADING_SERVER_URL: `${request.gradingBaseUrl}/g/${token}`,
        A2RL_RUN_TOKEN: token,
        A2RL_AGENT_DIR: agentDir,
        ...(driver ? { LLM_MODEL: driver } : {}),
        ...passThroughEnv(spec),
      };
      const command = spec.dir ? ['bash', path.posix.join(agentDir, 'start.sh')] : ['bash', '-c', request.agentCommand!];
      const sandboxed = sandboxCommand({ kind: sandbox, workspace: layout, agentDir: agentsRoot(), command, env });
      // Everything given to the agent is archived too (content-addressed, so once per task in
      // practice): replay and audit bundles can then restore data/ and models/ exactly.
      for (const file of prepared.dataManifest) {
        await this.artifacts.put(createReadStream(path.join(layout.root, file.path)), { sha256: file.sha256, size: file.size });
      }
      await record('WorkspacePrepared', { workspace: layout.root, sandbox, mounts: sandboxed.mounts, dataManifest: prepared.dataManifest });

      // One context for the baseline grading and the run's training environment (serving variables were checked at start).
      const evaluation = createEvaluationContext(loadServingConfig(), 'cpu');
      const baseline = await this.baselines.getOrGrade(
        { task: task.id, baseModel: task.baseModel, evaluatorVersion: task.evaluatorVersion },
        async () => (await task.evaluate(layout.baseModelDir, prepared.privateDir, undefined, evaluation)).score,
      );
      await record('BaselineEvaluated', { score: baseline.score, cached: baseline.cached, evaluatorVersion: task.evaluatorVersion });

      const ctx: RunContext = { runId, task, workspace: layout, privateDir: prepared.privateDir, token, budgetSeconds: request.budgetSeconds, record, artifacts: this.artifacts };
      const budgetMs = request.budgetSeconds * 1000;
      registered = true;
      this.registry.register(ctx, {
        deadline: new Date(Date.now() + budgetMs),
        baselineScore: baseline.score,
        envContext: evaluation,
        onSubmitted: () => void prepared.runMeta.update({ last_submit_time: epochSeconds() }),
      });
      files = new FileWatcher({ root: layout.root, artifacts: this.artifacts, record: direct });
      await files.start();
      const output = new OutputRecorder({ artifacts: this.artifacts, record });
      if (sandbox === 'none') lock.pidFile = path.join(this.locksDir, `${runId}.pgid`);
      this.writeLock(lock);

      let handle;
      try {
        handle = await launchAgent({
          file: sandboxed.file,
          args: sandboxed.args,
          cwd: layout.root,
          env: sandbox === 'bwrap' ? {} : env,
          budgetMs,
          graceMs: request.graceMs,
          onOutput: output.write,
          pidFile: lock.pidFile,
          monitor: {
            onStart: (p) => void record('ProcessStarted', { pid: p.pid, ppid: p.ppid, argv: p.argv.slice(0, 4096), cwd: p.cwd, kind: p.kind }),
            onExit: (p) =>
              void record('ProcessExited', {
                pid: p.pid,
                ...(p.exitCode !== undefined ? { exitCode: p.exitCode } : {}),
                ...(p.signal !== undefined ? { signal: p.signal } : {}),
                durationMs: p.durationMs,
                cpuMs: p.cpuMs,
                peakRssKb: p.peakRssKb,
              }),
          },
        });
      } catch (err) {
        await files.stop().catch(() => undefined);
        await this.registry.unregister(runId);
        await record('AgentExited', { reason: 'crashed' });
        await record('RunCompleted', { submissions: 0 });
        await settle();
        await signer.seal();
        this.removeLock(runId);
        closed = true;
        throw err;
      }
      this.agents.set(runId, handle);
      if (this.interrupted) void handle.kill('killed'); // the interrupt came while the run was being set up
      const startedAt = handle.startedAt.getTime();
      await prepared.runMeta.update({ start_time: epochSeconds(handle.startedAt), timeout_s: request.budgetSeconds });
      await record('AgentStarted', { command: spec.dir ? `${spec.id}: ${command.join(' ')}` : request.agentCommand!, pid: handle.pid });
      launched = true;

      const progress = () =>
        request.onProgress?.({
          runId,
          task: task.id,
          elapsedS: (Date.now() - startedAt) / 1000,
          remainingS: Math.max(0, (startedAt + budgetMs - Date.now()) / 1000),
          submissions: tally.submissions.size,
          best: tally.best,
          baseline: baseline.score,
        });
      const ticker = setInterval(progress, 1000);
      let exit;
      try {
        exit = await handle.exited;
      } finally {
        clearInterval(ticker);
        this.agents.delete(runId);
      }
      await this.registry.unregister(runId); // waits for gradings in flight and flushes rollouts
      await files.stop();
      await output.stop();
      await settle();
      await record('AgentExited', {
        ...(exit.exitCode !== undefined ? { exitCode: exit.exitCode } : {}),
        ...(exit.signal !== undefined ? { signal: exit.signal } : {}),
        reason: exit.reason,
      });
      await prepared.runMeta.update({ end_time: epochSeconds() });
      await record('RunCompleted', { ...(tally.best !== null ? { best: tally.best } : {}), submissions: tally.submissions.size });
      await settle();
      await signer.seal(); // the final head covers the whole run
      this.removeLock(runId);
      progress();
      return {
        runId,
        task: task.id,
        agent: spec.id,
        driver,
        baseline: baseline.score,
        best: tally.best,
        improvement: tally.best === null ? null : round2(tally.best - baseline.score),
        submissions: tally.submissions.size,
        state: 'completed',
        exitReason: exit.reason,
        sandbox,
        workspace: layout.root,
      };
    } catch (err) {
      if (!launched && !closed) {
        await files?.stop().catch(() => undefined);
        if (registered) await this.registry.unregister(runId).catch(() => undefined);
        const message = err instanceof Error ? err.message : String(err);
        await record('RunInterrupted', { reason: `setup failed before the agent started: ${message}`.slice(0, 4000) }).catch(() => undefined);
        await settle().catch(() => undefined);
        await signer.seal().catch(() => undefined);
        this.removeLock(runId);
      }
      throw err;
    }
  }

  /**
   * Runs left open by a harness that died: record RunInterrupted (their events up to the crash are
   * all in the ledger) and kill whatever of their agents survived. Returns the interrupted run ids.
   */
  async recoverInterruptedRuns(): Promise<string[]> {
    let names: string[];
    try {
      names = readdirSync(this.locksDir).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
    const interrupted: string[] = [];
    for (const name of names.sort()) {
      const file = path.join(this.locksDir, name);
      const lock = JSON.parse(readFileSync(file, 'utf8')) as RunLock;
      if (lock.pid === process.pid || processAlive(lock.pid)) continue;
      if (lock.pidFile) await killLeftoverProcessGroup(lock.pidFile).catch(() => 0);
      await this.ledger.record(lock.runId, 'RunInterrupted', { reason: `the harness (pid ${lock.pid}) exited while the run was open` });
      await this.sealStored(lock.runId);
      rmSync(file, { force: true });
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
    const existing = loadSigningKey(this.config.home);
    if (existing) return existing;
    const created = initSigningKey(this.config.home);
    warn(`created the ledger signing key ${created.keyId} in ${keysDir(this.config.home)} (a2rl keys show prints its public key)`);
    return created;
  }

  private writeLock(lock: RunLock): void {
    mkdirSync(this.locksDir, { recursive: true });
    writeFileSync(path.join(this.locksDir, `${lock.runId}.json`), JSON.stringify(lock));
  }

  private removeLock(runId: string): void {
    rmSync(path.join(this.locksDir, `${runId}.json`), { force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `<task>-<UTC yyyymmddHHMMSS>-<6 hex>`: sortable by start, unique, safe as a path and stream name. */
function newRunId(taskId: string): string {
  const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return `${taskId}-${stamp}-${randomBytes(3).toString('hex')}`;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

/** Credentials external agents need (their declared API keys), passed into the sandbox by name. */
function passThroughEnv(spec: AgentSpec): Record<string, string> {
  const names = [...(spec.requires.env ?? []), ...(spec.requires.anyEnv ?? []), 'LLM_API_KEY', 'LLM_BASE_URL'];
  const out: Record<string, string> = {};
  for (const name of names) if (process.env[name]) out[name] = process.env[name]!;
  return out;
}
