import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { LedgerService } from '../ledger/ledger.service.js';
import type { ProjectionRunnerService } from '../readmodels/readmodels.module.js';
import { failedCall, llmCall } from '../../projections/transcript/testing/llm-call.js';
import { followRunEvents, followTranscript } from './follow.js';
import { LedgerRunSource } from './run-source.js';
import { until } from '../../test/testing/helpers.js';

// `a2rl transcript --follow` over a real SQLite ledger: a writer appends a run's events while the
// follower polls it, as the harness and the CLI do from two processes.

const RUN = 'follow-1';
const START: Array<[EventType, EventData<EventType>]> = [
  ['RunScheduled', { task: 'ref-arith', agent: 'claude-code', baseModel: 'b', budgetSeconds: 60, seed: 0, mode: 'free' }],
  ['AgentStarted', { command: 'start.sh', gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } }],
];
const REST: Array<[EventType, EventData<EventType>]> = [
  ['LlmCallRecorded', llmCall({ callId: 'c1', userText: 'Train a model\nthen submit it' })],
  ['ProcessStarted', { pid: 9, ppid: 1, argv: ['python3', 'code/train.py'], cwd: '/ws', observedAt: '2026-01-01T00:00:03.000Z' }],
  ['LlmCallRecorded', failedCall({ callId: 'c2', toolResults: [{ id: 'tu-c1', name: 'Bash', output: 'loss 0.1' }] })],
  ['LlmCallRecorded', llmCall({ callId: 'c3', toolResults: [{ id: 'tu-c1', name: 'Bash', output: 'loss 0.1' }], toolCalls: [], outputText: 'Done.', stopReason: 'end_turn' })],
  ['AgentExited', { reason: 'completed', exitCode: 0 }],
  ['RunCompleted', { submissions: 0 }],
];

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function ledger() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-follow-'));
  const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
  cleanup.push(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const service = new LedgerService(store, () => new Date(Date.UTC(2026, 0, 1)));
  const source = new LedgerRunSource(undefined as unknown as ProjectionRunnerService, service, undefined as unknown as ArtifactStore, store);
  const append = async (items: Array<[EventType, EventData<EventType>]>) => {
    for (const [type, data] of items) await service.record(RUN, type, data);
  };
  return { source, append };
}

describe('following a run', () => {
  it('yields what is recorded, then each new event as it is appended, and ends with the event that closes the run', async () => {
    const { source, append } = await ledger();
    await append(START);
    const seen: string[] = [];
    const writer = (async () => {
      for (const item of REST) {
        await new Promise((r) => setTimeout(r, 5));
        await append([item]);
      }
    })();
    for await (const e of followRunEvents(source, RUN, { pollMs: 2 })) seen.push(`${e.seq}:${e.type}`);
    await writer;
    expect(seen).toEqual([...START, ...REST].map(([type], seq) => `${seq}:${type}`));
  });

  it('prints the transcript call by call, then the totals, as text or as JSON lines', async () => {
    const { source, append } = await ledger();
    await append(START);
    const out: string[] = [];
    const following = followTranscript(source, RUN, (text) => out.push(text), { pollMs: 2 });
    await append(REST);
    await following;
    expect(out).toHaveLength(4); // three calls, then the totals
    expect(out[0].split('\n').slice(0, 3)).toEqual([
      '── turn 1 · seq 2 · claude-sonnet-4-5-20250929 (anthropic messages, streamed) · 200 ok (tool_use) · 1.2 s, first byte 0.3 s · 1,000 in / 50 out tokens · $0.00375',
      '  user: Train a model',
      '      then submit it',
    ]);
    expect(out[1].split('\n').slice(0, 3)).toEqual([
      '',
      '── failed call · seq 4 · claude-sonnet-4-5 (anthropic messages, streamed) · 504 upstream_timeout · 1.2 s · ? in / ? out tokens · cost unknown',
      '  tool result Bash [tu-c1]: loss 0.1',
    ]);
    expect(out[2].includes('  assistant: Done.\n')).toBe(true);
    expect(out[3]).toBe('\n══ 3 calls: 2 turns, 0 on the side, 1 failed · 1 tool call, 2 tool results · 2,000 in / 100 out tokens (cache 0 read, 0 written) · cost ≥ $0.0075 (1 call without a price) · ok×2, upstream_timeout×1\n');

    const lines: string[] = [];
    await followTranscript(source, RUN, (text) => lines.push(text), { pollMs: 2, json: true });
    const parsed = lines.map((l) => JSON.parse(l) as { callId?: string; totals?: { calls: number } });
    expect(parsed.map((p) => p.callId ?? `totals ${p.totals?.calls}`)).toEqual(['c1', 'c2', 'c3', 'totals 3']);
  });

  it('refuses an unknown run, and stops when aborted while the run is still open', async () => {
    const { source, append } = await ledger();
    await expect(followTranscript(source, 'nope', () => undefined, { pollMs: 2 })).rejects.toThrow('no run "nope" in the ledger');
    await append(START);
    const abort = new AbortController();
    const seen: A2rlEvent[] = [];
    const following = (async () => {
      for await (const e of followRunEvents(source, RUN, { pollMs: 2, signal: abort.signal })) seen.push(e);
    })();
    // Aborted once it has read what there is (however long that takes), not after a fixed time.
    await until('the two events read', () => seen.length >= 2);
    abort.abort();
    await following;
    expect(seen.map((e) => e.seq)).toEqual([0, 1]);
  });
});
