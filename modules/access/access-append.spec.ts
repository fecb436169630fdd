import { describe, expect, it } from '@jest/globals';
import { prepareAppend } from '../ledger/append-rules.js';
import { NonContiguousAppendError } from '../ledger/errors.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { ACCESS_EVENT_TYPES, accessIdOfStream, accessStreamName, campaignStreamName, streamName } from '../ledger/events/ids.js';

const T = '2026-03-01T00:00:00.000Z';
const token = (id: string, seq = 0) => buildEvent('TokenCreated', id, seq, T, { tokenId: 'abcd1234', name: 'ci', role: 'viewer', sha256: 'a'.repeat(64), expiresAt: null });
const record = (id: string, seq: number) =>
  buildEvent('AccessRecorded', id, seq, T, { actor: { kind: 'anonymous', id: '10.0.0.9', name: 'anonymous' }, action: 'token-use', target: null, outcome: 'refused', detail: 'GET /runs from 10.0.0.9: no credential' });

describe('append rules for the access stream', () => {
  it('names the one access stream access-log, whose events carry runId "log"', () => {
    expect(accessStreamName()).toBe('access-log');
    expect(accessIdOfStream('access-log')).toBe('log');
    expect(accessIdOfStream('run-log')).toBeNull();
    expect([...ACCESS_EVENT_TYPES].sort()).toEqual(['AccessRecorded', 'TokenCreated', 'TokenRevoked']);
  });

  it('accepts access events, in seq order, in the access stream', () => {
    expect(prepareAppend('access-log', [token('log'), record('log', 1)], 'no_stream')).toHaveLength(2);
    expect(prepareAppend('access-log', [record('log', 5)], 4n)).toHaveLength(1);
  });

  it('refuses access events in run and campaign streams, and their events in the access stream', () => {
    expect(() => prepareAppend(streamName('r-1'), [token('r-1')], 'no_stream')).toThrow(/TokenCreated belongs to an access stream, not run-r-1/);
    expect(() => prepareAppend(campaignStreamName('c-1'), [token('c-1')], 'no_stream')).toThrow(/TokenCreated belongs to an access stream/);
    expect(() => prepareAppend('access-log', [buildEvent('AgentStarted', 'log', 0, T, { command: 'x' })], 'no_stream')).toThrow(/AgentStarted belongs to a run stream, not access-log/);
    expect(() => prepareAppend('access-log', [buildEvent('CampaignCancelled', 'log', 0, T, {})], 'no_stream')).toThrow(/CampaignCancelled belongs to a campaign stream/);
  });

  it('refuses an event of another access id, a gap, and an unknown stream kind', () => {
    expect(() => prepareAppend('access-log', [token('other')], 'no_stream')).toThrow(NonContiguousAppendError);
    expect(() => prepareAppend('access-log', [record('log', 2)], 0n)).toThrow(/does not follow expected revision 0/);
    expect(() => prepareAppend('audit-log', [token('log')], 'no_stream')).toThrow(/is not a run stream/);
  });

  it('refuses an AccessRecorded with an unknown action, outcome or actor kind before anything is written', () => {
    const base = { actor: { kind: 'token', id: 'a', name: 'a', role: 'viewer' }, action: 'export', target: null, outcome: 'ok' };
    for (const data of [{ ...base, action: 'delete' }, { ...base, outcome: 'maybe' }, { ...base, actor: { ...base.actor, kind: 'root' } }, { ...base, target: undefined }, { ...base, extra: 1 }]) {
      expect(() => buildEvent('AccessRecorded', 'log', 0, T, data as never)).toThrow(/AccessRecorded payload is invalid/);
    }
  });
});
