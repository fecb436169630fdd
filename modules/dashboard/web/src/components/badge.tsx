import type { RunState } from '../types.js';

const STATE_TONE: Record<string, string> = {
  scheduled: 'neutral',
  running: 'info',
  completed: 'good',
  interrupted: 'warn',
  setup_failed: 'bad',
  cancelled: 'neutral',
  pending: 'neutral',
  failed: 'bad',
};

/**
 * A run's or campaign's state. `outcome`: the failure class an LLM-driven run that tested the
 * infrastructure is shown by instead of `completed` (projections/run-analysis/outcome-badge.ts):
 * amber, never green, its state still in the title and data-state.
 */
export function StateBadge({ state, harnessGone, outcome, testId }: { state: RunState | string | null | undefined; harnessGone?: boolean; outcome?: string | null; testId?: string }) {
  const shown = harnessGone ? 'interrupted' : (state ?? 'unknown');
  if (outcome && !harnessGone) {
    return (
      <span class="badge tone-warn" data-testid={testId} data-state={shown} data-outcome={outcome} title={`${shown}, but the run tested the infrastructure, not the agent (${outcome}); left off the scoreboard`}>
        {shown.replace(/_/g, ' ')}: {outcome.replace(/^infra_/, '').replace(/_/g, ' ')}
      </span>
    );
  }
  return (
    <span class={`badge tone-${STATE_TONE[shown] ?? 'neutral'}`} data-testid={testId} data-state={shown} title={harnessGone ? 'the harness that ran it is gone' : undefined}>
      {shown.replace(/_/g, ' ')}
    </span>
  );
}

export function FailureBadge({ failureClass }: { failureClass: string | null | undefined }) {
  if (!failureClass) return <span class="muted">—</span>;
  const tone = failureClass === 'success' ? 'good' : failureClass.startsWith('infra') || failureClass === 'cancelled' ? 'neutral' : 'bad';
  return <span class={`badge tone-${tone}`}>{failureClass.replace(/_/g, ' ')}</span>;
}
