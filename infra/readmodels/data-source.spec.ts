import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { openReadModels } from './data-source.js';
import { holdSqliteRead } from '../../test/testing/sqlite-read-holder.js';

const BUILT = path.resolve('dist/infra/readmodels/data-source.js');

/**
 * One process that loads the module, waits for `startAt` (so that all of them open together, not
 * staggered by their start-up), opens the read models at `url` and exits 0, or prints why not and exits 1.
 */
function openInAnotherProcess(url: string, startAt: number): Promise<{ code: number | null; stderr: string }> {
  const script = `import(${JSON.stringify(BUILT)})
    .then(async (m) => { while (Date.now() < ${startAt}) await new Promise((r) => setTimeout(r, 1)); return m.openReadModels(${JSON.stringify(url)}); })
    .then((d) => d.destroy())
    .catch((e) => { console.error(String(e)); process.exit(1); })`;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

// Needs the PostgreSQL at 127.0.0.1:5432 (trust auth, database `test`), as the other PostgreSQL legs.
describe('opening the read models', () => {
  it('on one fresh PostgreSQL schema from several openers at once: every one opens, migrated once', async () => {
    const schema = `a2rl_rm_race_${randomUUID().replace(/-/g, '').slice(0, 10)}`;
    const url = `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`;
    // Workers started in the same second each open the read models; without the advisory lock most of
    // these failed (duplicate catalog rows from CREATE SCHEMA / CREATE TABLE racing).
    const opened = await Promise.allSettled(Array.from({ length: 6 }, () => openReadModels(url)));
    const sources = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    try {
      expect(opened.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
      const migrations = (await sources[0].query(`SELECT count(*)::int AS n FROM "${schema}".read_model_migrations`)) as Array<{ n: number }>;
      expect(migrations[0].n).toBe(sources[0].migrations.length);
    } finally {
      await sources[0]?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await Promise.all(sources.map((s) => s.destroy()));
    }
  }, 120_000);

  // Switching a fresh file to WAL needs an exclusive lock: while another process reads it for longer
  // than the driver's busy timeout (5 s), the switch fails with "database is locked". An opener keeps
  // trying (what the race between a scheduler and a worker on one fresh home needs, when it loses).
  it('on a SQLite file another process holds a read on for longer than the busy timeout: opens once the read ends', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'a2rl-rm-held-'));
    const file = path.join(dir, 'readmodels.db');
    try {
      const holder = await holdSqliteRead(file, 6500);
      const source = await openReadModels(`sqlite://${file}`);
      try {
        const rows = (await source.query('SELECT count(*) AS n FROM read_model_migrations')) as Array<{ n: number }>;
        expect(rows[0].n).toBe(source.migrations.length);
      } finally {
        await source.destroy();
        await holder.ended;
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  // A scheduler and a worker started together on one home both open its fresh readmodels.db; one
  // failed with "table read_model_migrations already exists" before the SQLite retry. Processes, not
  // DataSources in this one, since the race is between processes (and needs the built module).
  (existsSync(BUILT) ? it : it.skip)('on one fresh SQLite file from several processes at once: every one opens, migrated once', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'a2rl-rm-race-'));
    try {
      for (let round = 0; round < 3; round++) {
        const url = `sqlite://${path.join(dir, `readmodels-${round}.db`)}`;
        const startAt = Date.now() + 3000;
        const results = await Promise.all(Array.from({ length: 6 }, () => openInAnotherProcess(url, startAt)));
        expect(results.filter((r) => r.code !== 0).map((r) => r.stderr)).toEqual([]);
        const source = await openReadModels(url);
        try {
          const rows = (await source.query('SELECT count(*) AS n FROM read_model_migrations')) as Array<{ n: number }>;
          expect(rows[0].n).toBe(source.migrations.length);
        } finally {
          await source.destroy();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
