import { agentsRoot } from '../../agents/agent-registry.js';
import { POLLER_LIMITS } from '../../instrumentation/process-monitor.js';
import { ptraceTracerProblem } from '../../instrumentation/ptrace-tracer.js';
import { sandboxCommand } from '../../sandbox/sandbox.js';
import type { AgentExit, AgentHandle, LaunchOptions } from '../agent-process.js';
import type { RunControl } from '../run-control.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { epochSeconds } from '../workspace.js';
import type { AgentCommand } from './agent-env.js';
import type { Observed } from './observe.js';
import type { Prepared } from './prepare.js';

/** What `startAgent` produced: the running agent, until its exit is known (it exited, or was stopped at teardown). */
export class LaunchedAgent {
  private exit: AgentExit | undefined;

  constructor(
    readonly handle: AgentHandle,
    private readonly runId: string,
    private readonly control: RunControl,
  ) {}

  /** Why it ended, once it has ('crashed' while unknown). */
  get exitReason(): AgentExit['reason'] {
    return this.exit?.reason ?? 'crashed';
  }

  /** Waits for the agent's own exit (or the budget's kill). */
  async exited(): Promise<AgentExit> {
    try {
      return (this.exit = await this.handle.exited);
    } finally {
      this.control.untrack(this.runId);
    }
  }

  /** Its exit: as it exited, or killed now if it still runs (the teardown's first act). */
  async stop(): Promise<AgentExit> {
    if (this.exit) return this.exit;
    this.exit = await this.handle.kill('killed').catch((): AgentExit => ({ reason: 'crashed' }));
    this.control.untrack(this.runId);
    return this.exit;
  }
}

/** The launcher's options: the agent's command wrapped in its sandbox, under the budget (enforced on the whole tree). */
export function launchOptions(s: RunSession, prepared: Prepared, observed: Observed, agent: AgentCommand): LaunchOptions {
  const { layout, runDir } = prepared.workspace;
  const bwrap = prepared.sandbox === 'bwrap';
  const sandboxed = sandboxCommand({
    kind: prepared.sandbox, plan: prepared.plan, workspace: layout, agentDir: agentsRoot(), runDir,
    agentUid: prepared.agentUid, command: agent.command, env: agent.env, forwards: observed.forwards, limits: s.limits, cgroupProcs: prepared.cgroup?.procs,
    binds: s.commands.binds, home: prepared.home, runtime: prepared.runtime,
    lifeline: bwrap ? 'lifeline.sock' : undefined,
  });
  return {
    file: sandboxed.file,
    args: sandboxed.args,
    cwd: layout.root,
    // The sandbox's prelude gets no environment of the harness: the agent could read it from /proc.
    env: bwrap ? { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } : agent.env,
    fds: sandboxed.fds,
    budgetMs: s.segment.budgetSeconds * 1000,
    graceMs: s.request.graceMs,
    onOutput: s.instrumentation.output.write,
    pidFile: observed.pidFile,
    monitor: s.instrumentation.processes,
    execHoldMs: s.spec.execHoldMs,
  };
}

/** Spawns the agent. A throw here is the agent's crash, not a set-up failure. Torn down first of all: the agent stopped. */
export async function startAgent(deps: RunDeps, s: RunSession, options: LaunchOptions): Promise<LaunchedAgent> {
  const handle = await deps.launcher.launch(options);
  const launched = new LaunchedAgent(handle, s.runId, deps.control);
  s.stack.defer(() => launched.stop());
  deps.control.track(s.runId, handle);
  return launched;
}

/** The launched agent announced: the process tracer's limits said, run_meta.json's start, AgentStarted. */
export async function announceAgent(deps: RunDeps, s: RunSession, prepared: Prepared, observed: Observed, agent: AgentCommand, launched: LaunchedAgent): Promise<void> {
  const { handle } = launched;
  if (handle.tracer === 'proc') s.warn(`WARNING: ${POLLER_LIMITS}. Install strace (\`a2rl doctor\`) so that every program is recorded with what it really ran.`);
  const noPtrace = handle.tracer === 'strace' ? ptraceTracerProblem() : undefined;
  if (noPtrace) s.warn(`WARNING: traced with strace (${noPtrace}): slower for processes that fork without exec, and an exec by a process that exec'd before is not held for its capture (docs/runs.md, "Process tracing").`);
  if (deps.control.interrupted) void handle.kill('killed'); // the interrupt came while the run was being set up
  // A resumed agent's clock starts as far back as its earlier segments used: start_time + timeout_s is when this launch's budget ends.
  await prepared.workspace.runMeta.update({ start_time: epochSeconds(handle.startedAt) - s.segment.usedSeconds, timeout_s: s.request.budgetSeconds });
  const gateway = s.spec.llm && observed.gateway ? { gateway: { providers: s.spec.llm.providers, url: observed.gateway.url } } : {};
  await s.record('AgentStarted', { command: agent.described, pid: handle.pid, ...gateway });
}
