import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { assertValidEvent, buildEvent, EventTooLargeError, InvalidEventError } from '../../modules/ledger/events/envelope.js';
import { accessStreamName, campaignStreamName, streamName } from '../../modules/ledger/events/ids.js';
import { NonContiguousAppendError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import { allPages, type EventStore, type RecordedEvent, type Subscription } from '../../modules/ledger/event-store.port.js';

/**
 * The one contract every EventStore adapter passes. A leg supplies storage it can open twice
 * (`open()`), plus a URL for `openEventStore` so a child process can write to the same storage.
 */
export interface ContractHarness {
  url: string;
  open(): Promise<EventStore>;
  cleanup(): Promise<void>;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const T0 = '2026-01-01T00:00:00.000Z';

export function agentEvent(runId: string, seq: number, command = `step ${seq}`): A2rlEvent {
  return buildEvent('AgentStarted', runId, seq, T0, { command });
}

/** Campaign events: the envelope's runId holds the campaign id. */
export function campaignEvents(campaignId: string, from: number, count: number): A2rlEvent[] {
  return Array.from({ length: count }, (_, i) =>
    from + i === 0 ? buildEvent('CampaignCancelled', campaignId, 0, T0, {}) : buildEvent('RunRequested', campaignId, from + i, T0, { cell: from + i, attempt: 1 }),
  );
}

/** Access-stream events: the envelope's runId holds the stream's id (`log` in production). */
export function accessEvents(id: string, from: number, count: number): A2rlEvent[] {
  return Array.from({ length: count }, (_, i) =>
    from + i === 0
      ? buildEvent('TokenCreated', id, 0, T0, { tokenId: 'abcd1234', name: 'ci', role: 'viewer', sha256: 'a'.repeat(64), expiresAt: null })
      : buildEvent('AccessRecorded', id, from + i, T0, { actor: { kind: 'token', id: 'abcd1234', name: 'ci', role: 'viewer' }, action: 'token-use', target: null, outcome: 'ok' }),
  );
}

export function newRunId(): string {
  return `c-${randomUUID()}`;
}

export async function collect(iterable: AsyncIterable<RecordedEvent>): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const e of iterable) out.push(e);
  return out;
}

/** Takes `count` events from a live subscription, failing if they do not arrive in time. */
export async function take(sub: Subscription, count: number, timeoutMs = 10_000): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  const it = sub[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`subscription delivered ${out.length}/${count} events in ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    while (out.length < count) {
      const next = await Promise.race([it.next(), timeout]);
      if (next.done) throw new Error(`subscription ended after ${out.length}/${count} events`);
      out.push(next.value);
    }
  } finally {
    clearTimeout(timer);
  }
  return out;
}

/** Races a promise against a timer that is always cleared (no open handle keeps Jest alive). */
async function within<T>(promise: Promise<T>, ms: number, onTimeout: () => T | never): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<T>((resolve, reject) => {
      timer = setTimeout(() => {
        try {
          resolve(onTimeout());
        } catch (e) {
          reject(e);
        }
      }, ms);
    })]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a live subscription delivers while `append` runs, up to the event `runId/seq`. */
async function liveUntil(store: EventStore, runId: string, seq: number, append: () => Promise<void>): Promise<RecordedEvent[]> {
  const sub = store.subscribeAll();
  try {
    const delivered = (async () => {
      const got: RecordedEvent[] = [];
      for await (const e of sub) {
        got.push(e);
        if (e.event.runId === runId && e.event.seq === seq) break;
      }
      return got;
    })();
    await append();
    return await within(delivered, 10_000, () => {
      throw new Error('live events not delivered');
    });
  } finally {
    await sub.close();
  }
}

const ids = (events: RecordedEvent[]) => events.map((e) => `${e.event.runId}/${e.event.seq}`);
const mine = (runIds: string[]) => (e: RecordedEvent) => runIds.includes(e.event.runId);

/** What a leg's storage can do beyond the port; every capability defaults to true. */
export interface ContractCapabilities {
  /**
   * Another process can open the storage by `url` and its acknowledged appends outlive it (the
   * SIGKILLed-writer test). False only for storage that lives inside this process (memory).
   */
  sharedAcrossProcesses?: boolean;
}

export function eventStoreContract(name: string, setup: () => Promise<ContractHarness>, capabilities: ContractCapabilities = {}): void {
  const acrossProcesses = capabilities.sharedAcrossProcesses === false ? it.skip : it;
  describe(`EventStore contract: ${name}`, () => {
    let harness: ContractHarness;
    let store: EventStore;

    beforeAll(async () => {
      harness = await setup();
      store = await harness.open();
    });
    afterAll(async () => {
      await store?.close();
      await harness?.cleanup();
    });

    it('reads a stream back in seq order with identical envelopes', async () => {
      const run = newRunId();
      const events = [0, 1, 2].map((s) => agentEvent(run, s));
      const result = await store.append(streamName(run), events, 'no_stream');
      expect(result.nextExpectedRevision).toBe(2n);
      expect(result.deduplicated).toBe(false);
      await store.append(streamName(run), [agentEvent(run, 3)], 2n);
      const read = await collect(store.readStream(streamName(run)));
      expect(read.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n]);
      expect(read.map((e) => e.event)).toEqual([...events, agentEvent(run, 3)]);
      expect(read.every((e) => e.stream === streamName(run))).toBe(true);
      expect(await store.streamRevision(streamName(run))).toBe(3n);
    });

    it('names the ledger the same for every open of it, and another ledger differently', async () => {
      const again = await harness.open();
      const other = await setup();
      const otherStore = await other.open();
      try {
        const identity = await store.identity();
        expect(identity).toMatch(new RegExp(`^${store.backend}:`));
        expect(await again.identity()).toBe(identity);
        expect(await otherStore.identity()).not.toBe(identity);
      } finally {
        await again.close();
        await otherStore.close();
        await other.cleanup();
      }
    });

    it('reads from a revision and treats unknown streams as empty', async () => {
      const run = newRunId();
      await store.append(streamName(run), [0, 1, 2, 3].map((s) => agentEvent(run, s)), 'no_stream');
      const tail = await collect(store.readStream(streamName(run), { fromRevision: 2n }));
      expect(tail.map((e) => e.event.seq)).toEqual([2, 3]);
      expect(await collect(store.readStream(streamName(newRunId())))).toEqual([]);
      expect(await store.streamRevision(streamName(newRunId()))).toBeNull();
    });

    it('reads all run streams in commit order, exclusive of the given position', async () => {
      const a = newRunId();
      const b = newRunId();
      await store.append(streamName(a), [agentEvent(a, 0)], 'no_stream');
      await store.append(streamName(b), [agentEvent(b, 0), agentEvent(b, 1)], 'no_stream');
      await store.append(streamName(a), [agentEvent(a, 1)], 0n);
      const all = (await collect(store.readAll())).filter(mine([a, b]));
      expect(ids(all)).toEqual([`${a}/0`, `${b}/0`, `${b}/1`, `${a}/1`]);
      const after = (await collect(store.readAll({ after: all[1].position }))).filter(mine([a, b]));
      expect(ids(after)).toEqual([`${b}/1`, `${a}/1`]);
      const positions = new Set(all.map((e) => e.position));
      expect(positions.size).toBe(all.length);
    });

    it('keeps campaign streams out of the run category and reads them, in commit order, in the campaign category', async () => {
      const run = newRunId();
      const a = newRunId();
      const b = newRunId();
      await store.append(campaignStreamName(a), campaignEvents(a, 0, 2), 'no_stream');
      await store.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      await store.append(campaignStreamName(b), campaignEvents(b, 0, 1), 'no_stream');
      await store.append(campaignStreamName(a), campaignEvents(a, 2, 1), 1n);
      await store.append(streamName(run), [agentEvent(run, 1)], 0n);

      const runs = await collect(store.readAll());
      expect(runs.every((e) => e.stream.startsWith('run-'))).toBe(true);
      expect(ids(runs.filter(mine([run])))).toEqual([`${run}/0`, `${run}/1`]);
      expect(await collect(store.readAll({ category: 'run' }))).toEqual(runs);

      const campaigns = await collect(store.readAll({ category: 'campaign' }));
      expect(campaigns.every((e) => e.stream.startsWith('campaign-'))).toBe(true);
      const ours = campaigns.filter(mine([a, b]));
      expect(ids(ours)).toEqual([`${a}/0`, `${a}/1`, `${b}/0`, `${a}/2`]);
      expect(ours.map((e) => e.stream)).toEqual([a, a, b, a].map(campaignStreamName));
      expect(ours[3].event).toEqual(campaignEvents(a, 2, 1)[0]);
      // Positions belong to the one all-stream: paging the campaign category from one skips runs' events.
      const rest = (await collect(store.readAll({ category: 'campaign', after: ours[1].position }))).filter(mine([a, b]));
      expect(ids(rest)).toEqual([`${b}/0`, `${a}/2`]);
      const page = await collect(store.readAll({ category: 'campaign', after: ours[0].position, maxCount: 2 }));
      expect(page.length).toBe(2);
      expect(page.every((e) => e.stream.startsWith('campaign-'))).toBe(true);
      expect(ids(await collect(store.readStream(campaignStreamName(a))))).toEqual([`${a}/0`, `${a}/1`, `${a}/2`]);
      expect(await store.streamRevision(campaignStreamName(a))).toBe(2n);
    });

    it('reads the all-stream in pages exactly as readAll reads it, across page boundaries, after a position, up to maxCount and per category', async () => {
      const run = newRunId();
      const campaign = newRunId();
      await store.append(streamName(run), Array.from({ length: 1203 }, (_, seq) => agentEvent(run, seq)), 'no_stream');
      await store.append(campaignStreamName(campaign), campaignEvents(campaign, 0, 2), 'no_stream');
      const inPages = async (options?: Parameters<EventStore['readAll']>[0]) => {
        const pages: RecordedEvent[][] = [];
        for await (const page of allPages(store, options)) pages.push(page);
        expect(pages.every((page) => page.length > 0)).toBe(true);
        return pages.flat();
      };
      const all = await collect(store.readAll());
      expect(ids((await inPages()).filter(mine([run])))).toEqual(ids(all.filter(mine([run]))));
      expect(await inPages()).toEqual(all);
      const ours = all.filter(mine([run]));
      expect(await inPages({ after: ours[600].position, maxCount: 550 })).toEqual(await collect(store.readAll({ after: ours[600].position, maxCount: 550 })));
      expect((await inPages({ after: ours[1201].position })).filter(mine([run])).map((e) => e.event.seq)).toEqual([1202]);
      expect(await inPages({ category: 'campaign' })).toEqual(await collect(store.readAll({ category: 'campaign' })));
    });

    it('keeps campaign events out of live subscriptions, which stay on run streams', async () => {
      const run = newRunId();
      const campaign = newRunId();
      await store.append(campaignStreamName(campaign), campaignEvents(campaign, 0, 1), 'no_stream');
      await store.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      const got = await liveUntil(store, run, 1, async () => {
        await store.append(campaignStreamName(campaign), campaignEvents(campaign, 1, 1), 0n);
        await store.append(streamName(run), [agentEvent(run, 1)], 0n);
      });
      expect(got.filter((e) => !e.stream.startsWith('run-')).map((e) => e.stream)).toEqual([]);
      expect(ids(got.filter(mine([run])))).toEqual([`${run}/0`, `${run}/1`]);
    });

    it('refuses campaign events in a run stream and run events in a campaign stream', async () => {
      const run = newRunId();
      const campaign = newRunId();
      const intoRun = await store.append(streamName(run), [campaignEvents(run, 0, 1)[0]], 'no_stream').catch((e: unknown) => e);
      expect(intoRun).toBeInstanceOf(NonContiguousAppendError);
      expect((intoRun as Error).message).toMatch(/CampaignCancelled belongs to a campaign stream/);
      const intoCampaign = await store.append(campaignStreamName(campaign), [agentEvent(campaign, 0)], 'no_stream').catch((e: unknown) => e);
      expect(intoCampaign).toBeInstanceOf(NonContiguousAppendError);
      expect((intoCampaign as Error).message).toMatch(/AgentStarted belongs to a run stream/);
      await expect(store.append(campaignStreamName(campaign), campaignEvents(newRunId(), 0, 1), 'no_stream')).rejects.toThrow(/belongs to campaign/);
      expect(await store.streamRevision(streamName(run))).toBeNull();
      expect(await store.streamRevision(campaignStreamName(campaign))).toBeNull();
    });

    it('keeps an access stream out of every all-stream read and live subscription, and reads it back', async () => {
      const run = newRunId();
      const access = newRunId();
      const got = await liveUntil(store, run, 0, async () => {
        await store.append(accessStreamName(access), accessEvents(access, 0, 2), 'no_stream');
        await store.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      });
      expect(got.filter((e) => !e.stream.startsWith('run-')).map((e) => e.stream)).toEqual([]);
      for (const category of ['run', 'campaign'] as const) {
        expect((await collect(store.readAll({ category }))).filter(mine([access]))).toEqual([]);
      }
      expect(ids(await collect(store.readStream(accessStreamName(access))))).toEqual([`${access}/0`, `${access}/1`]);
      expect(await store.streamRevision(accessStreamName(access))).toBe(1n);
    });

    it('refuses access events outside an access stream and other events in one', async () => {
      const run = newRunId();
      const campaign = newRunId();
      const access = newRunId();
      await expect(store.append(streamName(run), accessEvents(run, 0, 1), 'no_stream')).rejects.toThrow(/TokenCreated belongs to an access stream/);
      await expect(store.append(campaignStreamName(campaign), accessEvents(campaign, 0, 1), 'no_stream')).rejects.toThrow(/TokenCreated belongs to an access stream/);
      await expect(store.append(accessStreamName(access), [agentEvent(access, 0)], 'no_stream')).rejects.toThrow(/AgentStarted belongs to a run stream/);
      await expect(store.append(accessStreamName(access), campaignEvents(access, 0, 1), 'no_stream')).rejects.toThrow(/CampaignCancelled belongs to a campaign stream/);
      await expect(store.append(accessStreamName(access), accessEvents(newRunId(), 0, 1), 'no_stream')).rejects.toThrow(NonContiguousAppendError);
      for (const stream of [streamName(run), campaignStreamName(campaign), accessStreamName(access)]) expect(await store.streamRevision(stream)).toBeNull();
    });

    it('refuses a wrong expected revision with a typed conflict that names the actual revision', async () => {
      const run = newRunId();
      await store.append(streamName(run), [agentEvent(run, 0), agentEvent(run, 1)], 'no_stream');
      const stale = await store.append(streamName(run), [agentEvent(run, 1, 'different')], 0n).catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(WrongExpectedRevisionError);
      expect((stale as WrongExpectedRevisionError).actual).toBe(1n);
      const again = await store.append(streamName(run), [agentEvent(run, 0, 'different')], 'no_stream').catch((e: unknown) => e);
      expect(again).toBeInstanceOf(WrongExpectedRevisionError);
      const ahead = await store.append(streamName(run), [agentEvent(run, 6)], 5n).catch((e: unknown) => e);
      expect(ahead).toBeInstanceOf(WrongExpectedRevisionError);
      const read = await collect(store.readStream(streamName(run)));
      expect(read.map((e) => (e.event.data as { command: string }).command)).toEqual(['step 0', 'step 1']);
    });

    it('deduplicates a retried append and never stores an event twice', async () => {
      const run = newRunId();
      const batch = [agentEvent(run, 0), agentEvent(run, 1)];
      const first = await store.append(streamName(run), batch, 'no_stream');
      const retry = await store.append(streamName(run), batch, 'no_stream');
      expect(retry.deduplicated).toBe(true);
      expect(retry.nextExpectedRevision).toBe(1n);
      expect(retry.position).toBe(first.position);
      await store.append(streamName(run), [agentEvent(run, 2)], 1n);
      const late = await store.append(streamName(run), [agentEvent(run, 1)], 0n);
      expect(late.deduplicated).toBe(true);
      expect(late.nextExpectedRevision).toBe(1n);
      expect((await collect(store.readStream(streamName(run)))).length).toBe(3);
      expect((await collect(store.readAll())).filter(mine([run])).length).toBe(3);
    });

    it('rejects invalid and oversized events before anything is written', async () => {
      const run = newRunId();
      const bad = { ...agentEvent(run, 0), data: { command: 42 } } as unknown as A2rlEvent;
      await expect(store.append(streamName(run), [bad], 'no_stream')).rejects.toBeInstanceOf(InvalidEventError);
      const huge = { ...agentEvent(run, 0), data: { command: 'x'.repeat(300 * 1024) } } as A2rlEvent;
      const err = await store.append(streamName(run), [huge], 'no_stream').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EventTooLargeError);
      expect(String((err as Error).message)).toContain('262144');
      const wrongRun = agentEvent(newRunId(), 0);
      await expect(store.append(streamName(run), [wrongRun], 'no_stream')).rejects.toThrow(/belongs to run/);
      expect(await store.streamRevision(streamName(run))).toBeNull();
    });

    it('subscribes: catches up, then delivers live appends in order', async () => {
      const run = newRunId();
      await store.append(streamName(run), [0, 1, 2].map((s) => agentEvent(run, s)), 'no_stream');
      const sub = store.subscribeAll();
      try {
        const live = (async () => {
          const got: RecordedEvent[] = [];
          for await (const e of sub) {
            if (e.event.runId === run) got.push(e);
            if (got.length === 5) break;
          }
          return got;
        })();
        await new Promise((r) => setTimeout(r, 100));
        await store.append(streamName(run), [agentEvent(run, 3)], 2n);
        await store.append(streamName(run), [agentEvent(run, 4)], 3n);
        const got = await within(live, 10_000, () => {
          throw new Error('live events not delivered');
        });
        expect(got.map((e) => e.event.seq)).toEqual([0, 1, 2, 3, 4]);
      } finally {
        await sub.close();
      }
    });

    it('resumes from a checkpoint with no gap and no duplicate', async () => {
      const run = newRunId();
      await store.append(streamName(run), [0, 1, 2, 3].map((s) => agentEvent(run, s)), 'no_stream');
      const first = store.subscribeAll();
      let checkpoint: string | null = null;
      for await (const e of first) {
        if (e.event.runId === run && e.event.seq === 1) {
          checkpoint = e.position;
          break;
        }
      }
      await first.close();
      expect(checkpoint).not.toBeNull();
      await store.append(streamName(run), [agentEvent(run, 4)], 3n);
      const second = store.subscribeAll({ after: checkpoint });
      try {
        const got = (await take(second, 3)).filter(mine([run]));
        expect(got.map((e) => e.event.seq)).toEqual([2, 3, 4]);
      } finally {
        await second.close();
      }
    });

    it('ends a subscription promptly on close', async () => {
      const sub = store.subscribeAll({ after: null });
      const drained = (async () => {
        for await (const _ of sub) void _;
        return 'ended';
      })();
      await new Promise((r) => setTimeout(r, 50));
      await sub.close();
      await expect(within<string>(drained, 3000, () => 'still open')).resolves.toBe('ended');
    });

    acrossProcesses('keeps every acknowledged event, untorn, when the writer is SIGKILLed mid-append', async () => {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'append-child.ts'), harness.url], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const acked: Array<[string, number]> = [];
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      await new Promise<void>((resolve, reject) => {
        let buf = '';
        const timer = setTimeout(() => reject(new Error(`child acked only ${acked.length} appends; stderr: ${stderr}`)), 60_000);
        child.stdout.on('data', (d: Buffer) => {
          buf += d.toString();
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            const m = /^ack (\S+) (\d+)$/.exec(line);
            if (m) acked.push([m[1], Number(m[2])]);
          }
          if (acked.length >= 60) {
            clearTimeout(timer);
            child.kill('SIGKILL');
            resolve();
          }
        });
        child.on('exit', (code) => {
          if (acked.length < 60) {
            clearTimeout(timer);
            reject(new Error(`child exited (${code}) early; stderr: ${stderr}`));
          }
        });
      });
      await new Promise((r) => child.once('close', r));

      const reopened = await harness.open();
      try {
        const runs = [...new Set(acked.map(([run]) => run))];
        for (const run of runs) {
          const events = await collect(reopened.readStream(streamName(run)));
          events.forEach((e, i) => {
            expect(e.event.seq).toBe(i);
            assertValidEvent(e.event);
          });
          const maxAcked = Math.max(...acked.filter(([r]) => r === run).map(([, s]) => s));
          expect(events.length).toBeGreaterThan(maxAcked);
        }
      } finally {
        await reopened.close();
      }
    }, 90_000);
  });
}
