import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { OutputRecorder } from './output-recorder.js';
import type { Recorder } from '../ledger/recorder.js';
import type { EventData } from '../ledger/events/catalog.js';
import { limitAction } from '../../projections/derived-facts.js';
import { until } from '../../test/testing/helpers.js';

interface Recorded {
  type: string;
  data: { stream: 'stdout' | 'stderr'; chunk: { sha256: string; size: number; key: string } };
}

describe('OutputRecorder', () => {
  let dir: string;
  let artifacts: ArtifactStore;
  let events: Recorded[];
  const record: Recorder = async (type, data) => {
    events.push({ type, data } as Recorded);
  };
  const content = async (stream: 'stdout' | 'stderr') =>
    Buffer.concat(
      await Promise.all(events.filter((e) => e.data.stream === stream).map(async (e) => buffer(await artifacts.get(e.data.chunk.sha256)))),
    );

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'a2rl-out-'));
    artifacts = await FsArtifactStore.open(dir);
    events = [];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('cuts large output into chunks of at most 64 KiB whose concatenation is the exact stream', async () => {
    const rec = new OutputRecorder({ artifacts, record });
    const big = Buffer.alloc(150 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) % 251;
    for (let off = 0; off < big.length; off += 10_000) rec.write('stdout', big.subarray(off, off + 10_000));
    await rec.stop();
    const sizes = events.map((e) => e.data.chunk.size);
    expect(sizes.slice(0, -1).every((n) => n <= 65536 && n > 65536 - 8192)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(big.length);
    expect(events.every((e) => e.type === 'AgentOutput' && e.data.chunk.key === `sha256/${e.data.chunk.sha256.slice(0, 2)}/${e.data.chunk.sha256}`)).toBe(true);
    expect((await content('stdout')).equals(big)).toBe(true);
  });

  it('cuts a full chunk after its last line break, so a line near the cut (a printed key) is stored whole', async () => {
    const rec = new OutputRecorder({ artifacts, record });
    const line = `key=sk-ant-${'x'.repeat(40)}\n`;
    const before = Buffer.alloc(65536 - 20, 0x61);
    before[before.length - 1] = 0x0a;
    rec.write('stdout', Buffer.concat([before, Buffer.from(line), Buffer.alloc(70_000, 0x62)]));
    await rec.stop();
    const chunks = await Promise.all(events.map(async (e) => buffer(await artifacts.get(e.data.chunk.sha256))));
    expect(chunks.filter((c) => c.includes(line))).toHaveLength(1);
    expect(chunks[0].length).toBe(before.length); // cut right after the line break before the key
  });

  it('records a quiet stream after the delay, keeping stdout and stderr apart', async () => {
    const rec = new OutputRecorder({ artifacts, record, maxDelayMs: 50 });
    rec.write('stdout', Buffer.from('step 1\n'));
    rec.write('stderr', Buffer.from('warning\n'));
    rec.write('stdout', Buffer.from('step 2\n'));
    expect(events).toHaveLength(0);
    // The timer fires after 50 ms, later on a loaded machine: wait for what it records, not for a time.
    await until('both streams recorded', () => events.length >= 2);
    expect(events.map((e) => e.data.stream).sort()).toEqual(['stderr', 'stdout']);
    expect((await content('stdout')).toString()).toBe('step 1\nstep 2\n');
    expect((await content('stderr')).toString()).toBe('warning\n');
    await rec.stop();
    expect(events).toHaveLength(2);
  });

  it('flushes what is buffered on stop and refuses later writes', async () => {
    const rec = new OutputRecorder({ artifacts, record });
    rec.write('stderr', Buffer.from('Traceback: boom'));
    await rec.stop();
    expect((await content('stderr')).toString()).toBe('Traceback: boom');
    expect(() => rec.write('stdout', Buffer.from('late'))).toThrow(/after stop/);
  });

  describe('maxBytesPerStream', () => {
    it('archives exactly the first maxBytesPerStream bytes of a stream, then records LimitReached once and counts the rest', async () => {
      const all: Array<{ type: string; data: any }> = [];
      const limited: Recorder = async (type, data) => {
        all.push({ type, data });
        if (type === 'AgentOutput') events.push({ type, data } as Recorded);
      };
      const told: Array<[string, unknown]> = [];
      const rec = new OutputRecorder({ artifacts, record: limited, maxBytesPerStream: 100_000, onLimit: (limit, data) => void told.push([limit, data]) });
      const big = Buffer.alloc(200_000);
      for (let i = 0; i < big.length; i++) big[i] = (i * 13) % 251;
      for (let off = 0; off < big.length; off += 30_000) rec.write('stdout', big.subarray(off, off + 30_000));
      rec.write('stderr', Buffer.from('still archived\n'));
      for (let i = 0; i < 1000; i++) rec.write('stdout', Buffer.alloc(1000, 0x78)); // another megabyte, past the limit
      await rec.stop();
      expect((await content('stdout')).equals(big.subarray(0, 100_000))).toBe(true);
      expect((await content('stderr')).toString()).toBe('still archived\n');
      const limit = { limit: 'outputBytesPerStream', value: 120_000, max: 100_000, scope: 'stdout', observedAt: expect.any(String) };
      expect(all.filter((e) => e.type === 'LimitReached').map((e) => e.data)).toEqual([limit]);
      // The action is the limit's own: readers name it (it is not written).
      expect(limitAction(all.find((e) => e.type === 'LimitReached')!.data as EventData<'LimitReached'>)).toBe('stopped archiving stdout; later bytes are counted, not stored');
      expect(told).toEqual([['outputBytesPerStream', limit]]);
      // The limit is recorded after the stream's last archived chunk; the count of what was not archived at stop.
      const stdout = all.filter((e) => e.data.stream === 'stdout' || e.data.scope === 'stdout' || e.type === 'ObservationGap');
      expect(stdout.map((e) => e.type)).toEqual(['AgentOutput', 'AgentOutput', 'LimitReached', 'ObservationGap']);
      expect(all.at(-1)!.data).toEqual({ observer: 'output', reason: expect.stringMatching(/^stdout: 1100000 of its 1200000 bytes .* outputBytesPerStream limit of 100000 bytes/), count: 1_100_000, observedAt: expect.any(String) });
    });

    it('stores nothing of a stream past the limit however much arrives (nothing is buffered while dropping)', async () => {
      const rec = new OutputRecorder({ artifacts, record, maxBytesPerStream: 10 });
      rec.write('stdout', Buffer.from('0123456789abc'));
      const junk = Buffer.alloc(1024 * 1024, 0x41);
      for (let i = 0; i < 200; i++) rec.write('stdout', junk); // 200 MB
      expect((rec as unknown as { pending: { stdout: { parts: Buffer[] } } }).pending.stdout.parts).toEqual([]);
      await rec.stop();
      expect(events.filter((e) => e.type === 'AgentOutput').map((e) => e.data.chunk.size)).toEqual([10]);
      expect(events.map((e) => e.type)).toEqual(['AgentOutput', 'LimitReached', 'ObservationGap']);
      expect((await content('stdout')).toString()).toBe('0123456789');
    });

    it('is unlimited when absent', async () => {
      const rec = new OutputRecorder({ artifacts, record });
      rec.write('stdout', Buffer.alloc(300_000, 0x61));
      await rec.stop();
      expect((await content('stdout')).length).toBe(300_000);
    });
  });

  it('surfaces a recording failure from stop()', async () => {
    const rec = new OutputRecorder({ artifacts, record: async () => Promise.reject(new Error('ledger down')) });
    rec.write('stdout', Buffer.from('x'));
    await expect(rec.stop()).rejects.toThrow('ledger down');
  });
});
