import { describe, expect, it } from '@jest/globals';
import { v5 as uuidv5 } from 'uuid';
import { A2RL_EVENT_NAMESPACE, eventId } from './ids.js';

// eventId hashes with node:crypto; every id ever issued came from the uuid package's v5.
describe('eventId', () => {
  it('is the uuid package\'s v5 of runId/seq, byte for byte, for many run ids and seqs', () => {
    const runIds = ['r1', 'bench-query', 'ref-arith-20260101T000000Z-a1b2c3', 'log', '', 'x'.repeat(300), 'ünïcødé-😀-run', 'a/b c%d'];
    let checked = 0;
    for (const runId of runIds) {
      for (const seq of [0, 1, 9, 10, 99, 1000, 65_535, 999_999, 1_000_000, 2 ** 31, Number.MAX_SAFE_INTEGER, -1]) {
        expect(eventId(runId, seq)).toBe(uuidv5(`${runId}/${seq}`, A2RL_EVENT_NAMESPACE));
        checked += 1;
      }
    }
    for (let seq = 0; seq < 5000; seq += 1) expect(eventId('run-many', seq)).toBe(uuidv5(`run-many/${seq}`, A2RL_EVENT_NAMESPACE));
    expect(checked).toBe(runIds.length * 12);
  });

  it('refuses a run id uuid cannot encode (a lone surrogate), as before', () => {
    expect(() => uuidv5('bad-\uD800/0', A2RL_EVENT_NAMESPACE)).toThrow();
    expect(() => eventId('bad-\uD800', 0)).toThrow();
    expect(() => eventId('bad-\uDC00x', 0)).toThrow();
  });
});
