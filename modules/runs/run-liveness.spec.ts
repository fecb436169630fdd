import { describe, expect, it } from '@jest/globals';
import type { RunState } from '../ledger/run-lifecycle.js';
import { liveRun, runsWithHarnessGone, stateLabel } from './run-liveness.js';
import type { RunLock } from '../ledger/run-locks.port.js';

const locks = (...list: RunLock[]) => ({ list: () => list });
const run = (runId: string, state: RunState | null) => ({ runId, state, eventCount: 3 });

describe('runsWithHarnessGone', () => {
  it("names the runs whose lock's harness is not alive; this process's runs and live harnesses are not gone", () => {
    const gone = runsWithHarnessGone(locks({ runId: 'r-dead', pid: 11 }, { runId: 'r-live', pid: 12 }, { runId: 'r-self', pid: 13 }), (pid) => pid === 12, 13);
    expect([...gone]).toEqual(['r-dead']);
  });

  it('judges nothing without locks, or when they cannot be read', () => {
    expect(runsWithHarnessGone(undefined, () => false).size).toBe(0);
    const broken = { list: (): RunLock[] => { throw new SyntaxError('Unexpected end of JSON input'); } };
    expect(runsWithHarnessGone(broken, () => false).size).toBe(0);
  });
});

describe('liveRun', () => {
  const gone = new Set(['r-1', 'r-2', 'r-3']);

  it('shows an open run whose harness is gone as interrupted (harness gone), without changing the row it was given', () => {
    const row = run('r-1', 'running');
    const shown = liveRun(row, gone);
    expect(shown).toEqual({ runId: 'r-1', state: 'interrupted', eventCount: 3, harnessGone: true });
    expect(stateLabel(shown)).toBe('interrupted (harness gone)');
    expect(row.state).toBe('running');
    expect(liveRun(run('r-2', 'scheduled'), gone).state).toBe('interrupted');
  });

  it('leaves ended runs (a lock left over by a crash while sealing) and runs with a live harness as recorded', () => {
    for (const state of ['completed', 'cancelled', 'setup_failed', 'interrupted'] as const) {
      const row = run('r-3', state);
      expect(liveRun(row, gone)).toBe(row);
    }
    const live = run('r-9', 'running');
    expect(liveRun(live, gone)).toBe(live);
    expect(stateLabel(live)).toBe('running');
    expect(stateLabel(run('r-0', null))).toBe('-');
  });
});
