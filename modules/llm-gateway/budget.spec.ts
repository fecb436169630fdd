import { describe, expect, it } from '@jest/globals';
import { SpendGate, type Admission } from './budget.js';

const r = (tokens: number, costUsd: number | null = null) => ({ tokens, costUsd });

/** The admission if it is decided now, else 'waiting'. */
async function now(admission: Promise<Admission | null>): Promise<Admission | null | 'waiting'> {
  return Promise.race([admission, new Promise<'waiting'>((resolve) => setImmediate(() => resolve('waiting')))]);
}

describe('SpendGate', () => {
  it('lets calls go while their reservations fit, then queues them first come, first served', async () => {
    const gate = new SpendGate({ maxTokens: 1000 });
    expect(await now(gate.admit(r(400)).admission)).toEqual({ go: true, alone: false });
    expect(await now(gate.admit(r(400)).admission)).toEqual({ go: true, alone: false });
    const third = gate.admit(r(500)).admission;
    const fourth = gate.admit(r(100)).admission; // would fit, but waits behind the third
    expect([await now(third), await now(fourth)]).toEqual(['waiting', 'waiting']);
    expect(gate.held).toEqual({ tokens: 800, costUsd: 0, calls: 2 });
    expect(gate.spent.tokens).toBe(0);
    gate.settle(r(400), { tokens: 300, costUsd: null }); // spent 300, held 400: 700 + 400 > 1000 still
    expect(await now(third)).toBe('waiting');
    gate.settle(r(400), { tokens: 300, costUsd: null }); // spent 600, nothing held: 600 + 500 > 1000, the third goes alone
    expect(await now(third)).toEqual({ go: true, alone: true });
    expect(await now(fourth)).toBe('waiting');
    gate.settle(r(500), { tokens: 500, costUsd: null }); // spent 1100: the limit is reached
    expect(await now(fourth)).toEqual({ go: false, limit: 'llmTokens', value: 1100, max: 1000 });
  });

  it('counts what the earlier segments of a resumed run spent from the start', async () => {
    const gate = new SpendGate({ maxTokens: 1000, maxCostUsd: 2 }, { tokens: 1000, costUsd: 0.5 });
    expect(gate.spent).toMatchObject({ tokens: 1000, costUsd: 0.5 });
    expect(await now(gate.admit(r(10)).admission)).toEqual({ go: false, limit: 'llmTokens', value: 1000, max: 1000 });
  });

  it('holds cost reservations against the cost limit, and refuses once the spend reaches it', async () => {
    const gate = new SpendGate({ maxCostUsd: 1 });
    expect(await now(gate.admit(r(10, 0.6)).admission)).toEqual({ go: true, alone: false });
    const second = gate.admit(r(10, 0.6)).admission;
    expect(await now(second)).toBe('waiting');
    gate.settle(r(10, 0.6), { tokens: 10, costUsd: 1.2 });
    expect(await now(second)).toEqual({ go: false, limit: 'llmCostUsd', value: 1.2, max: 1 });
  });

  it('takes a cancelled call out of the queue (its admission is null) and decides the next', async () => {
    const gate = new SpendGate({ maxTokens: 100 });
    await gate.admit(r(80)).admission;
    const waiting = gate.admit(r(80));
    const next = gate.admit(r(10)).admission;
    waiting.cancel();
    expect([await now(waiting.admission), await now(next)]).toEqual([null, { go: true, alone: false }]);
  });

  it('without limits every call goes at once', async () => {
    const gate = new SpendGate();
    for (let i = 0; i < 5; i++) expect(await now(gate.admit(r(1e9)).admission)).toEqual({ go: true, alone: false });
  });
});
