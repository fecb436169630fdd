import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { streamName } from '../ledger/events/ids.js';
import { storedColumnFailures } from './verify-columns.js';

// The SQLite adapter's own columns, edited in the file behind its back, against the signed bytes.

const RUN = 'columns-run';
const STREAM = streamName(RUN);
const at = '2026-01-01T00:00:00.000Z';

describe("a2rl verify's check of the stored columns", () => {
  let dir: string;
  let file: string;
  const events = [
    buildEvent('RunScheduled', RUN, 0, at, { task: 'ref-arith', agent: 'reference', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }),
    buildEvent('AgentStarted', RUN, 1, at, { command: 'bash start.sh' }),
    buildEvent('AgentExited', RUN, 2, at, { exitCode: 0, reason: 'completed' }),
  ];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-columns-'));
    file = path.join(dir, 'ledger.db');
    const store = await SqliteEventStore.open(file);
    await store.append(STREAM, events, 'no_stream');
    await store.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Applies `sql` to the file, reads the stream through the adapter, undoes it; returns every failure. */
  async function failuresAfter(sql: string, undo: string): Promise<ReturnType<typeof storedColumnFailures>> {
    const db = new Database(file);
    db.exec(sql);
    try {
      const store = await SqliteEventStore.open(file);
      const recorded: RecordedEvent[] = [];
      for await (const r of store.readStream(STREAM)) recorded.push(r);
      await store.close();
      return recorded.flatMap((r) => storedColumnFailures(r));
    } finally {
      db.exec(undo);
      db.close();
    }
  }

  it('finds nothing on an untouched stream, whose reads carry the columns', async () => {
    const store = await SqliteEventStore.open(file);
    const recorded: RecordedEvent[] = [];
    for await (const r of store.readStream(STREAM)) recorded.push(r);
    await store.close();
    expect(recorded.map((r) => r.stored)).toEqual(events.map((e) => ({ id: e.id, type: e.type })));
    expect(recorded.flatMap((r) => storedColumnFailures(r))).toEqual([]);
  });

  it('names the event whose type column was changed', async () => {
    const failures = await failuresAfter("UPDATE events SET type = 'RunCompleted' WHERE revision = 1", "UPDATE events SET type = 'AgentStarted' WHERE revision = 1");
    expect(failures).toEqual([
      { check: 'event', seq: 1, message: `event ${events[1].id} (AgentStarted): the store's type column is "RunCompleted", the signed bytes say "AgentStarted": the store was altered outside a2rl` },
    ]);
  });

  it('names the event whose id column was changed', async () => {
    const failures = await failuresAfter(
      "UPDATE events SET id = '00000000-0000-5000-8000-000000000000' WHERE revision = 2",
      `UPDATE events SET id = '${events[2].id}' WHERE revision = 2`,
    );
    expect(failures.map((f) => [f.seq, f.message.split(': ')[1]])).toEqual([[2, `the store's id column is "00000000-0000-5000-8000-000000000000", the signed bytes say "${events[2].id}"`]]);
  });

  it('names the event filed under another revision', async () => {
    const failures = await failuresAfter('UPDATE events SET revision = 7 WHERE revision = 1', 'UPDATE events SET revision = 1 WHERE revision = 7');
    expect(failures).toEqual([expect.objectContaining({ seq: 1, message: expect.stringContaining(`the store's revision is 7, the signed bytes say 1`) })]);
  });

  it('checks the decoded event the adapter hands out, and the stream it came from', () => {
    const [first] = events;
    const bytes = Buffer.from(JSON.stringify(first));
    const recorded: RecordedEvent = { stream: STREAM, revision: 0n, position: '1', bytes, event: { ...first, type: 'RunCompleted' } as never };
    expect(storedColumnFailures(recorded).map((f) => f.message)).toEqual([expect.stringContaining(`the store's decoded event's type is "RunCompleted", the signed bytes say "RunScheduled"`)]);
    expect(storedColumnFailures({ ...recorded, event: first, stream: 'run-other' })).toEqual([
      expect.objectContaining({ message: expect.stringContaining(`the store's stream is "run-other", the signed bytes say "${STREAM}"`) }),
    ]);
  });
});
