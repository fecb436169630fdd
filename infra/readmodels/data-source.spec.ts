import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { openReadModels } from './data-source.js';

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
});
