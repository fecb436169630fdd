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

export function StateBadge({ state, harnessGone, testId }: { state: RunState | string | null | undefined; harnessGone?: boolean; testId?: string }) {
  const shown = harnessGone ? 'interrupted' : (state ?? 'unknown');
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
