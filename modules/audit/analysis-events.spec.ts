import { describe, expect, it } from '@jest/globals';
import { renderReport, REPORT_FORMATS } from '../reports/render.js';
import { buildReport, OUTPUT_TAIL_BYTES, TIMELINE_LANE_ITEMS } from '../reports/report-model.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { eventId } from '../ledger/events/ids.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import { AnalysisEvents, readByAnalysis } from '../../projections/run-analysis/analysis-events.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { memoryBlobs, sampleRun, sha, TRAIN_V1, TRAIN_V2 } from '../../projections/run-analysis/testing/run-fixture.js';

// `a2rl verify` folds a run into the events the analysis and the report read (AnalysisEvents) and
// analyses and renders from those: the analysis and every report format must be what the whole run gives.

const STDOUT = 'step 1: loss 0.5\n';
const STDERR = 'Traceback (most recent call last):\n  File "/ws/r/code/train.py", line 3, in <module>\nValueError: bad lr\n';
const blobs = memoryBlobs([TRAIN_V1, TRAIN_V2, STDOUT, STDERR]);
const chunk = (text: string) => ({ sha256: sha(text), size: text.length, key: `sha256/${sha(text).slice(0, 2)}/${sha(text)}` });

/**
 * The sample run with stdout chunks and a signed head after every event, a stderr chunk, a model
 * call, and `tail` events after its last one (what a run may end with: a head, or more output).
 */
function noisyRun(runId: string, tail: Array<[EventType, EventData<EventType>]>): A2rlEvent[] {
  const base = sampleRun(runId).events;
  const specs: Array<{ type: EventType; occurredAt: string; data: EventData<EventType> }> = [];
  const at = (e: A2rlEvent) => e.occurredAt;
  for (const e of base) {
    specs.push({ type: e.type, occurredAt: at(e), data: e.data });
    if (e.type === 'RunCompleted') break;
    specs.push({ type: 'AgentOutput', occurredAt: at(e), data: { stream: 'stdout', chunk: chunk(STDOUT), observedAt: at(e) } });
    if (e.type === 'ProcessStarted') specs.push({ type: 'AgentOutput', occurredAt: at(e), data: { stream: 'stderr', chunk: chunk(STDERR), observedAt: at(e) } });
    if (e.type === 'ProcessExited') specs.push({ type: 'LlmCallRecorded', occurredAt: at(e), data: llmCall({ callId: `c-${specs.length}` }) });
    specs.push({ type: 'TreeHeadSigned', occurredAt: at(e), data: { treeSize: specs.length, rootHash: sha(String(specs.length)), signature: 'sig', keyId: 'k' } });
  }
  const end = specs[specs.length - 1].occurredAt;
  for (const [type, data] of tail) specs.push({ type, occurredAt: end, data });
  return specs.map((s, seq) => buildEvent(s.type, runId, seq, s.occurredAt, s.data as never));
}

const head = (treeSize: number): [EventType, EventData<EventType>] => ['TreeHeadSigned', { treeSize, rootHash: sha('end'), signature: 'sig', keyId: 'k' }];
const stdout = (): [EventType, EventData<EventType>] => ['AgentOutput', { stream: 'stdout', chunk: chunk(STDOUT), observedAt: '2026-01-01T00:01:00.000Z' }];

/** Every envelope field and the data as a reader sees them (getters included), as plain JSON. */
function asRead(e: A2rlEvent): unknown {
  const data = e.type === 'AgentOutput' ? { ...e.data, chunk: { sha256: e.data.chunk.sha256, size: e.data.chunk.size, key: e.data.chunk.key } } : e.data;
  return JSON.parse(canonicalJson({ id: e.id, type: e.type, runId: e.runId, seq: e.seq, occurredAt: e.occurredAt, schemaVersion: e.schemaVersion, data }));
}

function folded(events: A2rlEvent[]): AnalysisEvents {
  const read = new AnalysisEvents();
  for (const e of events) read.add(e);
  return read;
}

describe('AnalysisEvents: the run as the analysis and the report read it', () => {
  it.each([
    ['ends with a signed head', [head(40), head(41)]],
    ['ends with more output (a live run)', [stdout(), stdout()]],
    ['ends with RunCompleted', []],
  ] as const)('gives the same analysis and reports as the whole run when it %s', async (_, tail) => {
    const events = noisyRun('fx-noisy', [...tail]);
    const read = folded(events);
    const kept = read.finish();
    expect(read.count).toBe(events.length);
    // The signed heads (one after every event here) are left out; everything else is read.
    expect(kept.length).toBe(events.filter((e) => e.type !== 'TreeHeadSigned').length + (events.at(-1)!.type === 'TreeHeadSigned' ? 1 : 0));
    expect(kept[0]).toBe(events[0]);
    // Held compactly, every field still reads as stored (the id and a chunk's key computed when read).
    expect(kept.map(asRead)).toEqual(events.filter((e, i) => readByAnalysis(e) || i === events.length - 1).map(asRead));

    const whole = await analyzeRun(events, blobs);
    const thin = await analyzeRun(kept, blobs, read.count);
    expect(canonicalJson(thin)).toBe(canonicalJson(whole));
    expect(whole.failure.class).toBe('success');
    expect(whole.llm).not.toBeNull();
    for (const format of REPORT_FORMATS) {
      expect(await renderReport({ analysis: thin, events: kept, blobs, level: 1 }, format)).toBe(await renderReport({ analysis: whole, events, blobs, level: 1 }, format));
    }
  });

  it('keeps output chunks (errors are read from stderr, the report shows the end of each stream) and lifecycle events, drops heads', () => {
    const events = noisyRun('fx-kinds', []);
    const first = (pick: (e: A2rlEvent) => boolean) => readByAnalysis(events.find(pick)!);
    expect(first((e) => e.type === 'AgentOutput' && e.data.stream === 'stderr')).toBe(true);
    expect(first((e) => e.type === 'AgentOutput' && e.data.stream === 'stdout')).toBe(true);
    expect(first((e) => e.type === 'TreeHeadSigned')).toBe(false);
    expect(events.filter((e) => e.type !== 'AgentOutput' && e.type !== 'TreeHeadSigned').every(readByAnalysis)).toBe(true);
  });

  it('renders a long run with a capped timeline: deterministic, the cap stated, the same from the folded events', async () => {
    const changes = TIMELINE_LANE_ITEMS + 501;
    const events = noisyRun('fx-long', Array.from({ length: changes }, (_, i) => ['FileChanged', { path: `logs/train-${i % 7}.log`, op: 'modify', sha256: sha(STDOUT), size: STDOUT.length, observedAt: '2026-01-01T00:01:00.000Z' }] as [EventType, EventData<EventType>]));
    const read = folded(events);
    const kept = read.finish();
    const whole = await analyzeRun(events, blobs);
    const report = await buildReport({ analysis: whole, events, blobs, level: 1 });
    const files = report.timeline.items.filter((item) => item.lane === 'files');
    expect(files.length).toBe(TIMELINE_LANE_ITEMS);
    expect(report.timeline.thinned).toEqual({ files: { shown: TIMELINE_LANE_ITEMS, of: events.filter((e) => e.type === 'FileChanged').length } });
    expect(files[0].seq).toBe(events.find((e) => e.type === 'FileChanged')!.seq); // evenly spaced from the lane's first item
    const md = await renderReport({ analysis: whole, events, blobs, level: 1 }, 'md');
    expect(md).toContain(`Timeline lanes with more than ${TIMELINE_LANE_ITEMS} items show ${TIMELINE_LANE_ITEMS}, evenly spaced: files ${TIMELINE_LANE_ITEMS} of`);
    const thin = await analyzeRun(kept, blobs, read.count);
    for (const format of REPORT_FORMATS) {
      const rendered = await renderReport({ analysis: whole, events, blobs, level: 1 }, format);
      expect(await renderReport({ analysis: whole, events, blobs, level: 1 }, format)).toBe(rendered);
      expect(await renderReport({ analysis: thin, events: kept, blobs, level: 1 }, format)).toBe(rendered);
    }
  });

  it('holds only the last stdout chunks the report shows, counting the others: the same analysis and reports', async () => {
    const change = (i: number): [EventType, EventData<EventType>] => ['FileChanged', { path: `logs/out-${i}.log`, op: 'create', sha256: sha(STDOUT), size: STDOUT.length, observedAt: '2026-01-01T00:01:00.000Z' }];
    const more = Array.from({ length: 600 }, (_, i) => (i % 3 === 2 ? change(i) : stdout()));
    const events = noisyRun('fx-output', [...more, head(9999)]);
    const read = new AnalysisEvents({ outputTailBytes: OUTPUT_TAIL_BYTES });
    for (const e of events) read.add(e);
    const kept = read.finish();
    const stdoutOf = (list: A2rlEvent[]) => list.filter((e) => e.type === 'AgentOutput' && e.data.stream === 'stdout');
    const [all, held] = [stdoutOf(events), stdoutOf(kept)];
    expect(held.length).toBe(Math.ceil(OUTPUT_TAIL_BYTES / STDOUT.length)); // just enough to reach the tail the report shows
    expect(read.omittedOutput).toEqual({ stdout: { chunks: all.length - held.length, bytes: (all.length - held.length) * STDOUT.length } });
    expect(kept.map((e) => e.seq)).toEqual([...kept.map((e) => e.seq)].sort((a, b) => a - b));
    expect(kept.map((e) => e.seq)).toEqual(events.filter((e, i) => e.type !== 'TreeHeadSigned' || i === events.length - 1).filter((e) => !all.includes(e) || held.some((h) => h.seq === e.seq)).map((e) => e.seq));

    const whole = await analyzeRun(events, blobs);
    const thin = await analyzeRun(kept, blobs, read.count);
    expect(canonicalJson(thin)).toBe(canonicalJson(whole));
    for (const format of REPORT_FORMATS) {
      const rendered = await renderReport({ analysis: whole, events, blobs, level: 1 }, format);
      expect(await renderReport({ analysis: thin, events: kept, blobs, level: 1, omittedOutput: read.omittedOutput }, format)).toBe(rendered);
    }
    // Without the count of what was left out, the output section would say less than the run did.
    expect(await renderReport({ analysis: thin, events: kept, blobs, level: 1 }, 'json')).not.toBe(await renderReport({ analysis: whole, events, blobs, level: 1 }, 'json'));
  });
  it('holds events as rows of their shape that read back exactly: odd times, a shared argv, an own __proto__ field, more shapes than it keeps tables for', () => {
    const runId = 'fx-rows';
    const at = '2026-01-01T00:00:00.000Z';
    const events: A2rlEvent[] = [buildEvent('RunScheduled', runId, 0, at, sampleRun(runId).events[0].data as never)];
    // As stored events are read (validated when recorded), with what a later schema or an old ledger may hold.
    const add = (type: EventType, data: unknown, occurredAt = at) =>
      events.push({ id: eventId(runId, events.length), type, runId, seq: events.length, occurredAt, schemaVersion: 1, data } as A2rlEvent);
    const argv = ['python', 'code/train.py', '--lr', '0.1'];
    add('ProcessStarted', { pid: 7, ppid: 1, argv: [...argv], cwd: '/ws', observedAt: '2026-01-01T00:00:01.000000Z' }); // not its milliseconds' ISO form
    add('ProcessStarted', { pid: 8, ppid: 1, argv: [...argv], cwd: '/ws', observedAt: '2026-01-01T00:00:02.000Z', exe: { path: '/usr/bin/python3', sha256: sha('py'), size: 3 } });
    add('ProcessExited', { pid: 7, exitCode: -0, durationMs: 0.125, cpuMs: null, observedAt: at }, '2026-01-01T00:00:03.000001Z');
    add('ProcessExited', JSON.parse('{"pid": 8, "__proto__": {"exitCode": 1}, "observedAt": "2026-01-01T00:00:04.000Z"}'));
    for (let i = 0; i < 70; i++) add('RolloutBatchRecorded', { env: 'e', episodes: i, steps: 2 * i, successRate: i / 70, meanReturn: -i / 3, ok: i % 2 === 0, [`extra${i}`]: 'x', observedAt: at });
    const kept = folded(events).finish();
    expect(kept.map(asRead)).toEqual(events.map(asRead));
    // As rows (their data built when read, not an own field): both starts and the rollouts up to 64
    // shapes; as objects: the first event, an exit whose time is not milliseconds, the __proto__ one.
    const rows = kept.filter((e) => !Object.prototype.hasOwnProperty.call(e, 'data'));
    expect(rows.length).toBe(64);
    expect(rows.slice(0, 3).map((e) => e.seq)).toEqual([1, 2, 5]);
    const starts = kept.filter((e): e is Extract<A2rlEvent, { type: 'ProcessStarted' }> => e.type === 'ProcessStarted');
    expect(starts[0].data.argv).toBe(starts[1].data.argv); // one copy of a command line run twice
    expect(Object.isFrozen(starts[0].data.argv)).toBe(true);
    expect(Object.is((kept[3].data as { exitCode: number }).exitCode, -0)).toBe(true);
    expect(Object.getPrototypeOf(kept[4].data)).toBe(Object.prototype);
    expect(Object.keys(kept[4].data as object)).toEqual(['pid', '__proto__', 'observedAt']);
  });
});
