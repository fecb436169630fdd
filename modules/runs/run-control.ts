import type { AgentStopper } from '../ledger/events/catalog.js';
import type { AgentHandle } from './agent-process.js';

/**
 * The agents of the runs in progress in this process and who asked to stop them: what an operator
 * interrupt, a campaign's stop and a limit reach, and what AgentExited.stoppedBy says.
 */
export class RunControl {
  /** Agents of the runs in progress, by run id. */
  private readonly agents = new Map<string, AgentHandle>();
  /** Who asked to stop a run's agent (the first to ask). */
  private readonly stoppers = new Map<string, AgentStopper>();
  private interruptedByOperator = false;

  /** Whether the operator interrupted (no new run starts; agents launched from now on are stopped at once). */
  get interrupted(): boolean {
    return this.interruptedByOperator;
  }

  /** Stops every running agent as at budget expiry (the operator's Ctrl-C). */
  async interruptAll(): Promise<void> {
    this.interruptedByOperator = true;
    for (const runId of this.agents.keys()) this.stopBy(runId, 'operator');
    await Promise.all([...this.agents.values()].map((agent) => agent.kill('killed')));
  }

  /** Stops one run's agent for `stopper`; false when it is not running here. */
  async stop(runId: string, stopper: AgentStopper): Promise<boolean> {
    const agent = this.agents.get(runId);
    if (!agent) return false;
    this.stopBy(runId, stopper);
    await agent.kill('killed');
    return true;
  }

  /** A launched agent: it can be stopped until `untrack`. */
  track(runId: string, agent: AgentHandle): void {
    this.agents.set(runId, agent);
  }

  untrack(runId: string): void {
    this.agents.delete(runId);
  }

  /** Who stopped an agent that ended `killed` (an interrupt during set-up kills the agent at its launch: the operator's). */
  stoppedBy(runId: string): AgentStopper | undefined {
    return this.stoppers.get(runId) ?? (this.interruptedByOperator ? 'operator' : undefined);
  }

  /** The run is closed: its stopper is forgotten. */
  forget(runId: string): void {
    this.stoppers.delete(runId);
  }

  private stopBy(runId: string, stopper: AgentStopper): void {
    if (!this.stoppers.has(runId)) this.stoppers.set(runId, stopper);
  }
}
