import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { WorkspaceRevisionRow } from '../../projections/workspace-revisions/workspace-revision.entity.js';
import { rowTable } from './row-table.js';

// Rows written by a RowTable read back exactly as written, on both databases: on PostgreSQL an
// entity of plain column types is inserted with COPY's text format and upserted as one array
// literal per column through unnest, and both escapings must carry every character (quotes,
// backslashes, tabs, line ends, braces, commas, the words NULL and \N, COPY's end marker \.).

const AWKWARD = ['', 'NULL', 'null', '"', '\\', '\\"', '{a,b}', 'a,b', ' lead and trail ', "it's", 'tab\tnew\nline', 'ünïcødé ✓ 😀', '[{"op":"x","path":"a\\\\b"}]',
  // Quotes or backslashes beside what JSON would escape otherwise (control characters) and what it
  // leaves alone (a surrogate pair, U+2028, DEL): each of the quoting's paths.
  '"\tquoted\ttab"', '\\\u0001\u001f', 'say "😀" \u2028 \u007f', '"\\n" is not "\n"',
  // COPY's text format: its NULL marker, end-of-data marker, escapes and separators as plain text.
  '\\N', '\\.', '\\.\n\\.', 'a\\tb\\n', 'cr\rlf\r\n', '\t\t', '\n'];

function revisionRow(i: number, text: string): WorkspaceRevisionRow {
  return { id: `run-${i}/${text}`, runId: `run-${i}`, lastSeq: i, occurredAt: text, eventType: text.slice(0, 32), replaces: i % 2 ? null : text, revisions: text };
}

function runListRow(i: number, text: string | null): RunListRow {
  return { runId: `run-${i}`, task: text, agent: text, driver: null, baseModel: text, state: null, eventCount: i * 1000, lastSeq: -1 + i, scheduledAt: text, lastEventAt: text ?? '' };
}

const legs = [
  {
    name: 'sqlite',
    async open(): Promise<{ dataSource: DataSource; dispose(): Promise<void> }> {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-rt-'));
      const dataSource = await openReadModels(`sqlite://${path.join(dir, 'readmodels.db')}`);
      return { dataSource, dispose: async () => { await dataSource.destroy(); await rm(dir, { recursive: true, force: true }); } };
    },
  },
  {
    name: 'postgres',
    async open(): Promise<{ dataSource: DataSource; dispose(): Promise<void> }> {
      const schema = `a2rl_rt_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const dataSource = await openReadModels(`postgres://postgres@127.0.0.1:5432/test?schema=${schema}`);
      return { dataSource, dispose: async () => { await dataSource.query(`DROP SCHEMA "${schema}" CASCADE`); await dataSource.destroy(); } };
    },
  },
];

describe.each(legs)('RowTable on $name', (leg) => {
  let opened: { dataSource: DataSource; dispose(): Promise<void> };
  beforeAll(async () => {
    opened = await leg.open();
  });
  afterAll(async () => {
    await opened.dispose();
  });

  it('inserts and upserts rows with awkward text and reads them back unchanged', async () => {
    const { dataSource } = opened;
    const table = rowTable(dataSource, WorkspaceRevisionRow);
    const rows = AWKWARD.map((text, i) => revisionRow(i, text));
    await dataSource.transaction((manager) => table.insert(manager, rows));
    const inserted = await table.load(dataSource.manager, rows.map((r) => r.id));
    expect(rows.map((r) => inserted.get(r.id))).toEqual(rows);
    const changed = rows.map((row, i) => ({ ...row, revisions: `${AWKWARD[(i + 1) % AWKWARD.length]}!`, replaces: i % 2 ? row.occurredAt : null }));
    await dataSource.transaction((manager) => table.upsert(manager, changed));
    const loaded = await table.load(dataSource.manager, rows.map((r) => r.id));
    expect(rows.map((r) => loaded.get(r.id))).toEqual(changed);
    expect(await table.all(dataSource.manager)).toEqual([...changed].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)));
  });

  it('writes inserted rows in the caller\'s transaction: a transaction that fails leaves none of them', async () => {
    const { dataSource } = opened;
    const table = rowTable(dataSource, WorkspaceRevisionRow);
    const rows = Array.from({ length: 300 }, (_, i) => revisionRow(10_000 + i, `rolled back ${i}`));
    await expect(
      dataSource.transaction(async (manager) => {
        await table.insert(manager, rows);
        expect((await table.load(manager, [rows[299].id])).size).toBe(1); // visible inside the transaction
        throw new Error('the batch failed after its rows were written');
      }),
    ).rejects.toThrow('the batch failed');
    expect((await table.load(dataSource.manager, rows.map((r) => r.id))).size).toBe(0);
  });

  it('carries nulls, integers and the empty string apart', async () => {
    const { dataSource } = opened;
    const table = rowTable(dataSource, RunListRow);
    const rows = [runListRow(1, null), runListRow(2, ''), runListRow(3, 'NULL'), runListRow(2_000_000, '"\\')];
    await dataSource.transaction((manager) => table.insert(manager, rows));
    const loaded = await table.load(dataSource.manager, rows.map((r) => r.runId));
    expect(rows.map((r) => loaded.get(r.runId))).toEqual(rows);
  });
});
