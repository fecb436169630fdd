import { describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { runGuard } from '../ledger/run-lifecycle.js';
import { RunRecorder } from './run-recorder.js';
import { RunRedaction } from './run-redaction.js';

const RUN = 'run-redaction-1';
const T = '2026-01-01T00:00:01.000Z';
const AT = new Date('2026-01-01T00:00:02.000Z');
const TOKEN = ['tok', 'A7f3K9q2Lm5Xw8Rz1Bv4'].join('_');
const SHA = 'a'.repeat(64);

/** A recorder over a real (in-memory) ledger: payloads are validated as in a run, the lifecycle guarded. */
function setup(redaction?: RunRedaction) {
  const store = new MemoryEventStore();
  const ledger = new LedgerService(store, () => new Date(T));
  const recorder = new RunRecorder({ runId: RUN, ledger, guard: runGuard(), ...(redaction ? { redaction } : {}) });
  const stored = async () => {
    const events: A2rlEvent[] = [];
    const bytes: Buffer[] = [];
    for await (const r of store.readStream(streamName(RUN))) {
      events.push(r.event);
      bytes.push(r.bytes);
    }
    return { events, bytes: Buffer.concat(bytes) };
  };
  return { recorder, stored };
}

const opened = async (recorder: RunRecorder) => {
  void recorder.record('RunScheduled', { task: 't', agent: 'reference', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' });
  void recorder.record('WorkspacePrepared', { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] });
};

describe('RunRecorder: secrets never enter the ledger', () => {
  it('records an argv holding the run token redacted, with a SecretRedacted fact right after it', async () => {
    const { recorder, stored } = setup(new RunRedaction({ secrets: [{ kind: 'run-token', value: TOKEN }], clock: () => AT }));
    await opened(recorder);
    const event = await recorder.record('ProcessStarted', { pid: 43, ppid: 42, argv: ['bash', '-c', `curl -s http://127.0.0.1:9/g/${TOKEN}/time`], cwd: '/w', observedAt: T });
    await recorder.settle();

    expect(event.type).toBe('ProcessStarted');
    const { events, bytes } = await stored();
    expect(events.map((e) => e.type)).toEqual(['RunScheduled', 'WorkspacePrepared', 'ProcessStarted', 'SecretRedacted']);
    expect(events[2].data).toEqual({ pid: 43, ppid: 42, argv: ['bash', '-c', 'curl -s http://127.0.0.1:9/g/[REDACTED:run-token]/time'], cwd: '/w', observedAt: T });
    expect(events[3].data).toEqual({ where: 'event', eventType: 'ProcessStarted', field: 'argv[2]', kind: 'run-token', count: 1, observedAt: AT.toISOString() });
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    expect(bytes.includes(TOKEN)).toBe(false);
    expect(event.seq).toBe(events[2].seq); // record() resolves with the event itself, not its fact
  });

  it('records key shapes found in any event redacted too', async () => {
    const key = ['sk', 'proj', 'Q'.repeat(20) + '7x_'.repeat(10)].join('-');
    const { recorder, stored } = setup(new RunRedaction({ clock: () => AT }));
    await opened(recorder);
    void recorder.record('ObservationGap', { observer: 'files', reason: `could not read ${key}`, observedAt: T });
    await recorder.settle();
    const { events } = await stored();
    expect(events.slice(2).map((e) => [e.type, e.data])).toEqual([
      ['ObservationGap', { observer: 'files', reason: 'could not read [REDACTED:pattern:openai-key]', observedAt: T }],
      ['SecretRedacted', { where: 'event', eventType: 'ObservationGap', field: 'reason', kind: 'pattern:openai-key', count: 1, observedAt: AT.toISOString() }],
    ]);
  });

  it('puts the facts before an event that closes the run, so the run still ends with it', async () => {
    const { recorder, stored } = setup(new RunRedaction({ secrets: [{ kind: 'run-token', value: TOKEN }], clock: () => AT }));
    await opened(recorder);
    const closing = await recorder.record('RunInterrupted', { reason: `setup failed: GET http://h/g/${TOKEN}/time: 500` });
    await recorder.settle(); // the lifecycle guard accepted every event

    const { events } = await stored();
    expect(events.map((e) => e.type)).toEqual(['RunScheduled', 'WorkspacePrepared', 'SecretRedacted', 'RunInterrupted']);
    expect(closing.type).toBe('RunInterrupted');
    expect(events[3].data).toEqual({ reason: 'setup failed: GET http://h/g/[REDACTED:run-token]/time: 500' });
    expect(events[2].data).toMatchObject({ where: 'event', eventType: 'RunInterrupted', field: 'reason', kind: 'run-token' });
  });

  it('applies secrets learnt during the run from then on', async () => {
    const redaction = new RunRedaction({ clock: () => AT });
    const { recorder, stored } = setup();
    recorder.redactWith(redaction);
    await opened(recorder);
    const argv = ['python', `--token=${TOKEN}`];
    void recorder.record('ProcessStarted', { pid: 1, ppid: 0, argv, cwd: '/w', observedAt: T });
    redaction.add([{ kind: 'run-token', value: TOKEN }]);
    void recorder.record('ProcessStarted', { pid: 2, ppid: 0, argv, cwd: '/w', observedAt: T });
    await recorder.settle();
    const { events } = await stored();
    expect(events.slice(2).map((e) => (e.type === 'ProcessStarted' ? e.data.argv[1] : e.type))).toEqual([`--token=${TOKEN}`, '--token=[REDACTED:run-token]', 'SecretRedacted']);
  });

  it('follows a blob stored redacted: the reference is rewritten and the blob fact names the file', async () => {
    const redaction = new RunRedaction({ clock: () => AT });
    const redacted = { sha256: 'b'.repeat(64), size: 30, key: `sha256/bb/${'b'.repeat(64)}` };
    redaction.blobs.set(SHA, { ref: redacted, hits: [{ kind: 'run-token', count: 2 }] });
    const { recorder, stored } = setup(redaction);
    await opened(recorder);
    void recorder.record('FileChanged', { path: 'code/a.py', op: 'create', sha256: SHA, size: 40, key: `sha256/aa/${SHA}`, observedAt: T });
    void recorder.record('FileChanged', { path: 'code/a.py', op: 'delete', previousSha256: SHA, observedAt: T });
    void recorder.record('AgentOutput', { stream: 'stdout', chunk: { sha256: SHA, size: 40, key: `sha256/aa/${SHA}` }, observedAt: T });
    void recorder.record('BaselineEvaluated', { score: 1, cached: true });
    void recorder.record('SubmissionReceived', { submissionId: 's1', modelPath: 'output/m', manifest: [], checkpoint: { sha256: SHA, size: 40, key: `sha256/aa/${SHA}` } });
    await recorder.settle();

    const { events } = await stored();
    expect(events.slice(2).map((e) => [e.type, e.data])).toEqual([
      ['FileChanged', { path: 'code/a.py', op: 'create', ...redacted, observedAt: T }],
      ['SecretRedacted', { where: 'blob', eventType: 'FileChanged', blob: 'file', path: 'code/a.py', kind: 'run-token', count: 2, observedAt: AT.toISOString() }],
      ['FileChanged', { path: 'code/a.py', op: 'delete', previousSha256: redacted.sha256, observedAt: T }],
      ['AgentOutput', { stream: 'stdout', chunk: redacted, observedAt: T }],
      ['SecretRedacted', { where: 'blob', eventType: 'AgentOutput', field: 'chunk', blob: 'output', kind: 'run-token', count: 2, observedAt: AT.toISOString() }],
      ['BaselineEvaluated', { score: 1, cached: true }],
      // Checkpoints are archived as graded: never remapped.
      ['SubmissionReceived', { submissionId: 's1', modelPath: 'output/m', manifest: [], checkpoint: { sha256: SHA, size: 40, key: `sha256/aa/${SHA}` } }],
    ]);
  });

  it('records the data as given without a redaction', async () => {
    const { recorder, stored } = setup();
    await opened(recorder);
    void recorder.record('ProcessStarted', { pid: 1, ppid: 0, argv: ['curl', `http://h/g/${TOKEN}`], cwd: '/w', observedAt: T });
    await recorder.settle();
    const { events } = await stored();
    expect(events.map((e) => e.type)).toEqual(['RunScheduled', 'WorkspacePrepared', 'ProcessStarted']);
    expect(JSON.stringify(events)).toContain(TOKEN);
  });
});
