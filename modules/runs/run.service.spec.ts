import { describe, expect, it, afterEach } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { BaselineCache } from '../grading/baseline-cache.js';
import type { GradingSockets } from '../grading/grading-sockets.js';
import { RunRegistry } from '../grading/run-registry.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { LedgerService } from '../ledger/ledger.service.js';
import type { Settings } from '../settings/settings.port.js';
import type { AgentExit, AgentHandle, LaunchOptions } from './agent-process.js';
import type { AgentLauncher, RunIds } from './run.ports.js';
import type { RunLock, RunLocks } from '../ledger/run-locks.port.js';
import { RunService, type RunRequest } from './run.service.js';
import { RunControl } from './run-control.js';
import { RunPipeline } from './run-pipeline.js';
import { openSession, type RunDeps } from './run-session.js';
import { prepare, schedule } from './steps/prepare.js';
import { planFrom } from '../sandbox/capabilities.js';
import { fakeTask } from './testing/fake-task.js';

// The run service with every port in memory: no agent process, no disk ledger, no artifact
// directory. The workspace is still a real directory (the file observer watches it).

/** What the fake agent does once "launched": it may write files and report processes and output. */
type Behaviour = (workspace: string, opts: LaunchOptions, agent: FakeAgent) => Promise<AgentExit | void>;

class FakeAgent implements Partial<AgentHandle> {
  readonly pid = 4242;
  readonly startedAt = new Date();
  readonly exited: Promise<AgentExit>;
  private finish!: (exit: AgentExit) => void;
  killedWith: string | undefined;

  constructor() {
    this.exited = new Promise((resolve) => (this.finish = resolve));
  }

  end(exit: AgentExit): void {
    this.finish(exit);
  }

  kill = async (reason: 'killed' | 'timeout' = 'killed'): Promise<AgentExit> => {
    this.killedWith = reason;
    this.finish({ signal: 'SIGTERM', reason });
    return this.exited;
  };
}

function harness(behaviour: Behaviour, opts: { launchFails?: boolean; evaluate?: () => Promise<never>; token?: string } = {}) {
  const home = mkdtempSync(path.join(tmpdir(), 'a2rl-runsvc-'));
  dirs.push(home);
  const settings: Settings = { home, ledgerUrl: 'memory://x', artifactsUrl: 'memory://x', readModelUrl: 'memory://x', workspacesDir: path.join(home, 'ws'), httpPort: 0, httpHost: '127.0.0.1' };
  const store = new MemoryEventStore();
  const ledger = new LedgerService(store, () => new Date());
  const artifacts = new MemoryArtifactStore();
  const locks = new Map<string, RunLock>();
  const runLocks: RunLocks = {
    write: (lock) => void locks.set(lock.runId, { ...lock }),
    remove: (runId) => void locks.delete(runId),
    list: () => [...locks.values()],
    pidFile: (runId) => path.join(home, `${runId}.pgid`),
  };
  let n = 0;
  const ids: RunIds = { runId: (task) => `${task}-run-${++n}`, token: () => opts.token ?? 'a-token-long-enough-to-pass' };
  const agents: FakeAgent[] = [];
  const launcher: AgentLauncher = {
    async launch(launch) {
      if (opts.launchFails) throw new Error('spawn bwrap ENOENT');
      const agent = new FakeAgent();
      agents.push(agent);
      void behaviour(launch.cwd, launch, agent).then((exit) => agent.end(exit ?? { exitCode: 0, reason: 'completed' }));
      return agent as unknown as AgentHandle;
    },
    killLeftovers: async () => 0,
    alive: (pid) => pid === process.pid,
  };
  const task = fakeTask();
  if (opts.evaluate) task.evaluate = opts.evaluate;
  // Unsandboxed: the sandbox itself is exercised by sandbox.spec.ts and the e2e suites.
  const plan = planFrom({ bwrap: null, harnessUid: 0, setpriv: false, prlimit: false, unprivilegedUserns: false, rootNamespaces: false, gpuDevices: [], notes: [] });
  const sockets = { open: async () => { throw new Error('no socket when unsandboxed'); } } as unknown as GradingSockets;
  const warnings: string[] = [];
  const leftoversKilled: string[] = [];
  launcher.killLeftovers = async (pidFile) => void leftoversKilled.push(pidFile);
  const env = { PATH: process.env.PATH };
  const deps: RunDeps = {
    settings, ledger, artifacts, registry: new RunRegistry(), baselines: new BaselineCache(path.join(home, 'baselines.json')), clock: () => new Date(), ids, locks: runLocks, launcher,
    tasks: () => task, sandboxes: () => plan, gradingSockets: sockets, operatorToken: 'operator-token-0123456789', env, diagnostics: { warn: (m) => void warnings.push(m) }, control: new RunControl(),
  };
  const service = new RunService(deps.settings, ledger, artifacts, deps.registry, deps.baselines, deps.clock, ids, runLocks, launcher, deps.tasks, deps.sandboxes, sockets, deps.operatorToken, env, deps.diagnostics);
  const request: RunRequest = { task: task.id, agentCommand: 'fake agent', budgetSeconds: 60, seed: 0, gradingBaseUrl: 'http://127.0.0.1:1', warn: () => {} };
  const events = async (runId: string) => {
    const out: A2rlEvent[] = [];
    for await (const e of ledger.events(runId)) out.push(e);
    return out;
  };
  return { service, deps, request, events, locks, agents, store, ledger, warnings, leftoversKilled };
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const types = (events: A2rlEvent[]) => events.map((e) => e.type).filter((t) => t !== 'TreeHeadSigned');

describe('RunService (in-memory ports)', () => {
  it('records a completed run in order: code written before a launch is in the ledger before that launch', async () => {
    const h = harness(async (ws, launch) => {
      await mkdir(path.join(ws, 'code'), { recursive: true });
      await writeFile(path.join(ws, 'code', 'train.py'), 'print("train")\n');
      launch.monitor!.onStart!({ pid: 7, ppid: 4242, argv: ['python3', 'code/train.py'], cwd: ws, executable: '/usr/bin/python3', startedAt: Date.now() } as never);
      launch.onOutput('stdout', Buffer.from('step 1\n'));
      launch.monitor!.onExit!({ pid: 7, exitCode: 0, durationMs: 5, cpuMs: 0, peakRssKb: 0, endedAt: Date.now() } as never);
    });
    const summary = await h.service.run(h.request);
    expect(summary).toMatchObject({ state: 'completed', exitReason: 'completed', submissions: 0 });
    const events = await h.events(summary.runId);
    const list = types(events);
    expect(list.slice(0, 3)).toEqual(['RunScheduled', 'WorkspacePrepared', 'BaselineEvaluated']);
    // The agent acts as soon as it is spawned: its first facts may precede AgentStarted.
    expect(list.filter((t) => t === 'AgentStarted')).toHaveLength(1);
    expect(list.slice(-3)).toEqual(['AgentExited', 'WorkspaceIntegrityChecked', 'RunCompleted']);
    const file = events.findIndex((e) => e.type === 'FileChanged' && e.data.path === 'code/train.py');
    const launch = events.findIndex((e) => e.type === 'ProcessStarted');
    expect(file).toBeGreaterThan(0);
    expect(launch).toBeGreaterThan(file);
    expect(events.find((e) => e.type === 'AgentOutput')).toBeDefined();
    expect(events.at(-1)!.type).toBe('TreeHeadSigned'); // sealed
    expect(h.locks.size).toBe(0);
  });

  it('closes a run whose budget ran out like any other, with the reason the launcher gave', async () => {
    const h = harness(async () => ({ signal: 'SIGKILL', reason: 'timeout' }));
    const summary = await h.service.run(h.request);
    const events = await h.events(summary.runId);
    expect(events.find((e) => e.type === 'AgentExited')!.data).toMatchObject({ signal: 'SIGKILL', reason: 'timeout' });
    expect(types(events).at(-1)).toBe('RunCompleted');
  });

  it('a set-up failure (the baseline cannot be graded) interrupts the run, never blames the agent, and seals it', async () => {
    const h = harness(async () => undefined, { evaluate: () => Promise.reject(new Error('model server down')) });
    await expect(h.service.run(h.request)).rejects.toThrow('model server down');
    const runId = [...(await collectRunIds(h.store))][0];
    const events = await h.events(runId);
    expect(types(events)).toEqual(['RunScheduled', 'WorkspacePrepared', 'RunInterrupted']);
    expect(events.find((e) => e.type === 'RunInterrupted')!.data).toEqual({ reason: 'setup failed before the agent started: model server down', cause: 'setup_failed' });
    expect(events.at(-1)!.type).toBe('TreeHeadSigned');
    expect(h.locks.size).toBe(0);
  });

  it('an agent that cannot be launched crashed: AgentExited crashed, then RunCompleted with no submissions', async () => {
    const h = harness(async () => undefined, { launchFails: true });
    await expect(h.service.run(h.request)).rejects.toThrow('spawn bwrap ENOENT');
    const runId = [...(await collectRunIds(h.store))][0];
    const events = await h.events(runId);
    expect(types(events).slice(-2)).toEqual(['AgentExited', 'RunCompleted']);
    expect(events.find((e) => e.type === 'AgentExited')!.data).toEqual({ reason: 'crashed' });
  });

  it('an operator interrupt stops the agent and closes the run as usual', async () => {
    const h = harness(async (_ws, _launch, agent) => {
      await h.service.interruptAll();
      return agent.exited;
    });
    const summary = await h.service.run(h.request);
    expect(summary).toMatchObject({ exitReason: 'killed', state: 'cancelled' }); // what `a2rl run --json` prints
    expect(h.agents[0].killedWith).toBe('killed');
    // The operator stopped it: recorded on AgentExited, so the run reads cancelled.
    expect((await h.events(summary.runId)).find((e) => e.type === 'AgentExited')!.data).toMatchObject({ reason: 'killed', stoppedBy: 'operator' });
    await expect(h.service.run(h.request)).rejects.toThrow(/interrupted by the operator/);
  });

  it("a campaign's stop records the campaign as the stopper; an agent that ends on its own has none", async () => {
    const h = harness(async (_ws, _launch, agent) => {
      if (h.agents.length > 1) return; // the second run's agent ends on its own
      // Launched, not yet registered as running: stop() answers false until it is (the open run's lock names it).
      while (!(await h.service.stop([...h.locks.keys()][0]))) await new Promise((resolve) => setImmediate(resolve));
      return agent.exited;
    });
    const stopped = await h.service.run(h.request);
    expect((await h.events(stopped.runId)).find((e) => e.type === 'AgentExited')!.data).toMatchObject({ reason: 'killed', stoppedBy: 'campaign' });
    expect(stopped.state).toBe('cancelled');
    const own = await h.service.run(h.request);
    expect(own.state).toBe('completed');
    expect((await h.events(own.runId)).find((e) => e.type === 'AgentExited')!.data).not.toHaveProperty('stoppedBy');
  });

  it('instrumentation facts carry their observation time, not the append time', async () => {
    const observed = Date.parse('2026-01-02T03:04:05.678Z');
    const h = harness(async (ws, launch) => {
      launch.monitor!.onStart!({ pid: 9, ppid: 4242, argv: ['true'], cwd: ws, startedAt: observed } as never);
      launch.monitor!.onExit!({ pid: 9, exitCode: 0, durationMs: 1, cpuMs: 0, peakRssKb: 0, endedAt: observed + 1 } as never);
    });
    const summary = await h.service.run(h.request);
    const events = await h.events(summary.runId);
    const started = events.find((e) => e.type === 'ProcessStarted')!;
    expect(started.data).toMatchObject({ observedAt: '2026-01-02T03:04:05.678Z' });
    expect(started.occurredAt).not.toBe('2026-01-02T03:04:05.678Z');
    expect(events.find((e) => e.type === 'ProcessExited')!.data).toMatchObject({ observedAt: '2026-01-02T03:04:05.679Z' });
  });

  it('a run re-entered after prepare (what a resume does) continues through the same steps and teardown', async () => {
    const h = harness(async () => ({ exitCode: 0, reason: 'completed' }));
    const pipeline = new RunPipeline(h.deps);
    const session = openSession(h.deps, h.request);
    await schedule(h.deps, session);
    const prepared = await prepare(h.deps, session);
    const summary = await pipeline.continueRun(session, prepared);
    expect(summary).toMatchObject({ runId: session.runId, state: 'completed', exitReason: 'completed', sandbox: 'none', workspace: prepared.workspace.layout.root });
    const list = types(await h.events(summary.runId));
    expect(list.slice(0, 3)).toEqual(['RunScheduled', 'WorkspacePrepared', 'BaselineEvaluated']);
    expect(list.slice(-3)).toEqual(['AgentExited', 'WorkspaceIntegrityChecked', 'RunCompleted']);
    expect(h.locks.size).toBe(0);
  });

  it('recovery closes the runs of a dead harness: RunInterrupted, sealed, lock removed', async () => {
    const h = harness(async () => undefined);
    await h.ledger.record('fake-task-dead', 'RunScheduled', { task: 'fake-task', agent: 'x', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    h.locks.set('fake-task-dead', { runId: 'fake-task-dead', pid: 999_999_999 });
    expect(await h.service.recoverInterruptedRuns()).toEqual(['fake-task-dead']);
    const events = await h.events('fake-task-dead');
    expect(events.map((e) => e.type)).toEqual(['RunScheduled', 'RunInterrupted', 'TreeHeadSigned']);
    expect(events[1].data).toMatchObject({ cause: 'harness_gone' });
    expect(h.locks.size).toBe(0);
    // The signing key was created by this recovery: said through the DIAGNOSTICS port, not on stderr.
    expect(h.warnings).toEqual([expect.stringMatching(/^created the ledger signing key /)]);
  });

  it('settleRun closes an open run as recovery does (leftovers killed, RunInterrupted, sealed, lock removed), and only once', async () => {
    const h = harness(async () => undefined);
    await h.ledger.record('fake-task-lost', 'RunScheduled', { task: 'fake-task', agent: 'x', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await h.ledger.record('fake-task-lost', 'BaselineEvaluated', { score: 0.25, cached: true, evaluatorVersion: '1' });
    h.locks.set('fake-task-lost', { runId: 'fake-task-lost', pid: 999_999_999, pidFile: '/nonexistent/fake-task-lost.pgid' });
    expect(await h.service.settleRun('fake-task-lost', 'the worker died')).toEqual({ state: 'interrupted', best: null, baseline: 0.25, interruptedNow: true });
    const events = await h.events('fake-task-lost');
    expect(events.map((e) => e.type)).toEqual(['RunScheduled', 'BaselineEvaluated', 'RunInterrupted', 'TreeHeadSigned']);
    expect(events[2].data).toEqual({ reason: 'the worker died', cause: 'harness_gone' });
    expect(h.leftoversKilled).toEqual(['/nonexistent/fake-task-lost.pgid']);
    expect(h.locks.size).toBe(0);
    expect(await h.service.settleRun('fake-task-lost', 'again')).toMatchObject({ state: 'interrupted', interruptedNow: false });
    expect((await h.events('fake-task-lost')).filter((e) => e.type === 'RunInterrupted')).toHaveLength(1);
  });

  it('a failure while the observers start undoes what was started and interrupts the run, sealed', async () => {
    // The grading API refuses a run token this short: observe() fails after its first disposers were pushed.
    const h = harness(async () => undefined, { token: 'short' });
    await expect(h.service.run(h.request)).rejects.toThrow(/too short/);
    const runId = [...(await collectRunIds(h.store))][0];
    const events = await h.events(runId);
    expect(types(events)).toEqual(['RunScheduled', 'WorkspacePrepared', 'BaselineEvaluated', 'RunInterrupted']);
    expect(events.find((e) => e.type === 'RunInterrupted')!.data).toMatchObject({ cause: 'setup_failed' });
    expect(events.at(-1)!.type).toBe('TreeHeadSigned');
    expect(h.locks.size).toBe(0);
    expect(h.agents).toHaveLength(0);
  });
});

async function collectRunIds(store: MemoryEventStore): Promise<Set<string>> {
  const ids = new Set<string>();
  for await (const recorded of store.readAll({})) ids.add(recorded.event.runId);
  return ids;
}
