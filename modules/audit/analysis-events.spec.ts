import { describe, expect, it } from '@jest/globals';
import { renderReport, REPORT_FORMATS } from '../reports/render.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { buildEvent } from '../ledger/events/envelope.js';
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
    expect(kept.at(-1)).toBe(events.at(-1));

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
});
