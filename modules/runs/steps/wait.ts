import type { AgentExit } from '../agent-process.js';
import type { RunDeps, RunSession } from '../run-session.js';
import type { LaunchedAgent } from './launch.js';

/** Seconds between two heartbeats of the run's lock. */
const HEARTBEAT_TICKS = 5;

/** The agent's exit or the budget's kill (the launcher enforces it); meanwhile the operator sees progress every second. */
export async function waitForExitOrBudget(deps: RunDeps, s: RunSession, agent: LaunchedAgent, baseline: number): Promise<AgentExit> {
  let ticks = 0;
  const ticker = setInterval(() => {
    reportProgress(deps, s, agent, baseline);
    // The lock's heartbeat: after a crash, resume counts the agent's time up to it (docs/resume.md).
    if (++ticks % HEARTBEAT_TICKS === 0) deps.locks.heartbeat?.(s.runId, deps.clock());
  }, 1000);
  try {
    return await agent.exited();
  } finally {
    clearInterval(ticker);
  }
}

/** One progress line's facts, for `request.onProgress`. */
export function reportProgress(deps: RunDeps, s: RunSession, agent: LaunchedAgent, baseline: number): void {
  const startedAt = agent.handle.startedAt.getTime();
  const budgetMs = s.segment.budgetSeconds * 1000;
  const now = deps.clock().getTime();
  s.request.onProgress?.({
    runId: s.runId,
    task: s.task.id,
    elapsedS: s.segment.usedSeconds + (now - startedAt) / 1000,
    remainingS: Math.max(0, (startedAt + budgetMs - now) / 1000),
    submissions: s.tally.submissions.size,
    best: s.tally.best,
    baseline,
  });
}
