import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent } from './catalog.js';
import { canonicalJson } from './canonical-json.js';
import { assertValidEvent, buildEvent, decodeEvent, encodeEvent, EventTooLargeError, InvalidEventError, MAX_EVENT_BYTES } from './envelope.js';
import { eventId, runIdOfStream, streamName } from './ids.js';
import { clearUpcasters, registerUpcaster, upcast } from './upcast.js';

const T = '2026-03-04T05:06:07.000Z';

describe('event ids', () => {
  it('are UUIDv5 of runId/seq: stable across calls and distinct per seq and run', () => {
    expect(eventId('r1', 0)).toBe(eventId('r1', 0));
    expect(eventId('r1', 0)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set([eventId('r1', 0), eventId('r1', 1), eventId('r2', 0)]).size).toBe(3);
  });

  it('map runs to run-<runId> streams and back', () => {
    expect(streamName('abc')).toBe('run-abc');
    expect(runIdOfStream('run-abc')).toBe('abc');
    expect(runIdOfStream('$stats')).toBeNull();
  });
});

describe('canonical JSON (RFC 8785)', () => {
  it('sorts keys recursively and formats numbers the ECMAScript way', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 1e21 }, e: 0.1 })).toBe('{"a":{"c":1e+21,"d":[3,{"y":2,"z":1}]},"b":1,"e":0.1}');
    expect(canonicalJson({ s: 'é\u2028"\n' })).toBe('{"s":"é\u2028\\"\\n"}');
  });

  it('stores events as their canonical bytes, which decode to the same envelope', () => {
    const e = buildEvent('RunScheduled', 'run1', 0, T, { task: 'ref-arith', agent: 'reference', baseModel: 'tiny', budgetSeconds: 60, seed: 1, mode: 'free' });
    const bytes = encodeEvent(e);
    expect(bytes.toString()).toBe(canonicalJson(e));
    expect(decodeEvent(bytes)).toEqual(e);
  });
});

describe('event validation', () => {
  it('builds a full envelope with id, version and ISO time', () => {
    const e = buildEvent('AgentStarted', 'run1', 3, new Date(T), { command: 'python train.py' });
    expect(e).toEqual({ type: 'AgentStarted', runId: 'run1', seq: 3, id: eventId('run1', 3), occurredAt: T, schemaVersion: 1, data: { command: 'python train.py' } });
  });

  it('rejects payloads that break the catalog, naming the field', () => {
    expect(() => buildEvent('SubmissionGraded', 'r', 0, T, { submissionId: 's1', score: 120, improvement: 0 })).toThrow(/data\.score/);
    expect(() => buildEvent('FileChanged', 'r', 0, T, { path: 'a', op: 'rename', linesAdded: 0, linesRemoved: 0 } as never)).toThrow(InvalidEventError);
    expect(() => buildEvent('AgentStarted', 'r', 0, T, { command: 'x', extra: 1 } as never)).toThrow(/extra/);
    expect(() => buildEvent('SubmissionReceived', 'r', 0, T, { submissionId: 's', modelPath: 'm', manifest: [{ path: 'w', sha256: 'nothex', size: 1 }] })).toThrow(/manifest/);
  });

  it('rejects bad envelopes: unknown type, bad run id, forged id, wrong version, extra fields', () => {
    const good = buildEvent('AgentStarted', 'r', 0, T, { command: 'x' });
    const cases: unknown[] = [
      { ...good, type: 'Nope' },
      { ...good, runId: '../etc' },
      { ...good, id: eventId('r', 1) },
      { ...good, schemaVersion: 2 },
      { ...good, occurredAt: 'yesterday' },
      { ...good, seq: -1 },
      { ...good, extra: true },
    ];
    for (const c of cases) expect(() => assertValidEvent(c)).toThrow(InvalidEventError);
  });

  it('refuses events over 256 KiB of canonical JSON with an error naming the limit', () => {
    const err = (() => {
      try {
        buildEvent('AgentStarted', 'r', 0, T, { command: 'x'.repeat(MAX_EVENT_BYTES) });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(EventTooLargeError);
    expect((err as Error).message).toMatch(/262144 bytes \(256 KiB\)/);
  });
});

describe('upcasting', () => {
  it('applies registered steps in order so old schema versions read as the current one', () => {
    clearUpcasters();
    registerUpcaster('AgentStarted', 1, (d) => ({ ...d, command: `v2:${String(d.cmd)}`, cmd: undefined }));
    registerUpcaster('AgentStarted', 2, (d) => ({ command: `${String(d.command)}|v3` }));
    const stored = { type: 'AgentStarted', runId: 'r', seq: 0, id: eventId('r', 0), occurredAt: T, schemaVersion: 1, data: { cmd: 'go' } } as unknown as A2rlEvent;
    expect(upcast(stored, 3)).toMatchObject({ schemaVersion: 3, data: { command: 'v2:go|v3' } });
    expect(upcast(stored)).toBe(stored); // already current for the catalog
    clearUpcasters();
    expect(() => upcast(stored, 2)).toThrow(/no upcaster for AgentStarted from schema version 1/);
  });
});
