import { describe, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { Instrumentation } from './instrumentation.js';
import { RunRecorder } from './run-recorder.js';

const RUN = 'run-causes-1';
const AT = new Date('2026-01-01T00:00:02.000Z');
const start = (pid: number, argv: string[]) => ({ pid, ppid: 1, argv, cwd: '/w', startedAt: AT.getTime() });
const exit = (pid: number) => ({ pid, exitCode: 0, durationMs: 5, cpuMs: 1, peakRssKb: 100, endedAt: AT.getTime() + 5 });

async function recorded(work: (inst: Instrumentation) => Promise<void>): Promise<A2rlEvent[]> {
  const root = await mkdtemp(join(tmpdir(), 'a2rl-inst-'));
  try {
    const store = new MemoryEventStore();
    const recorder = new RunRecorder({ runId: RUN, ledger: new LedgerService(store, () => AT) });
    const inst = new Instrumentation({ root, recorder, artifacts: new MemoryArtifactStore(), clock: () => AT });
    await work(inst);
    await inst.stop();
    const events: A2rlEvent[] = [];
    for await (const r of store.readStream(streamName(RUN))) events.push(r.event);
    return events;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

describe('Instrumentation: what caused a process fact', () => {
  it('names a process exit\'s start (the latest start of that pid) as its cause, with the pid', async () => {
    const events = await recorded(async (inst) => {
      void inst.processes.onStart(start(10, ['sleep', '1']));
      void inst.processes.onExit(exit(10));
      void inst.processes.onStart(start(10, ['sleep', '2'])); // the pid reused
      void inst.processes.onExit(exit(10));
      void inst.processes.onExit(exit(99)); // never seen starting
    });
    const exits = events.filter((e) => e.type === 'ProcessExited');
    const starts = events.filter((e) => e.type === 'ProcessStarted');
    expect(exits.map((e) => (e.type === 'ProcessExited' ? e.data.causedBy : null))).toEqual([
      { event: starts[0].id, seq: starts[0].seq, pid: 10 },
      { event: starts[1].id, seq: starts[1].seq, pid: 10 },
      undefined,
    ]);
  });

  it('names the model call whose shell tool call gave a process its command line, with the tool call id and the command', async () => {
    const toolCalls = [{ id: 'toolu_7', name: 'Bash', input: JSON.stringify({ command: 'python train.py' }) }];
    const events = await recorded(async (inst) => {
      await inst.record('LlmCallRecorded', llmCall({ toolCalls }));
      void inst.processes.onStart(start(11, ['bash', '-c', 'python train.py']));
      void inst.processes.onStart(start(12, ['python', 'train.py'])); // its child: no second link
    });
    const call = events.find((e) => e.type === 'LlmCallRecorded')!;
    const [parent, child] = events.filter((e) => e.type === 'ProcessStarted');
    expect(parent.type === 'ProcessStarted' && parent.data.causedBy).toEqual({ event: call.id, seq: call.seq, toolCallId: 'toolu_7', command: 'python train.py' });
    expect(child.type === 'ProcessStarted' && child.data.causedBy).toBeUndefined();
  });

  it('links a process queued right after its call, before the call is stored (the lane waits for it), and never one queued before the call', async () => {
    const toolCalls = [{ id: 'toolu_8', name: 'Bash', input: JSON.stringify({ command: 'make eval' }) }];
    const events = await recorded(async (inst) => {
      void inst.processes.onStart(start(20, ['make', 'eval'])); // before the call: not its effect
      void inst.record('LlmCallRecorded', llmCall({ toolCalls }));
      void inst.processes.onStart(start(21, ['bash', '-c', 'make eval']));
    });
    const call = events.find((e) => e.type === 'LlmCallRecorded')!;
    const causes = events.flatMap((e) => (e.type === 'ProcessStarted' ? [[e.data.pid, e.data.causedBy]] : []));
    expect(causes).toEqual([[20, undefined], [21, { event: call.id, seq: call.seq, toolCallId: 'toolu_8', command: 'make eval' }]]);
  });
});
