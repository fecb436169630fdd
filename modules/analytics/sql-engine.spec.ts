import { describe, expect, it } from '@jest/globals';
import { DEFAULT_LIMITS, QueryError, runQuery } from './sql-engine.js';
import type { TableData } from './table-schemas.js';

// The SQL engine on its own: tables copied into a locked in-memory DuckDB, typed as declared;
// only one read-only statement answered; no file access; limits that stop a query, never truncate it.

const T: TableData = {
  spec: { name: 't', columns: [{ name: 's', type: 'VARCHAR' }, { name: 'i', type: 'INTEGER' }, { name: 'b', type: 'BIGINT' }, { name: 'd', type: 'DOUBLE' }, { name: 'ok', type: 'BOOLEAN' }] },
  rows: [['x', 1, 9007199254740993n, 0.5, true], [null, null, null, null, null], ["it's", -2, 3n, 1e-9, false]],
};

describe('runQuery', () => {
  it('copies the rows in with their declared types and answers JSON values (big integers as strings)', async () => {
    const r = await runQuery([T], 'SELECT * FROM t ORDER BY i NULLS LAST');
    expect(r.columns).toEqual([{ name: 's', type: 'VARCHAR' }, { name: 'i', type: 'INTEGER' }, { name: 'b', type: 'BIGINT' }, { name: 'd', type: 'DOUBLE' }, { name: 'ok', type: 'BOOLEAN' }]);
    expect(r.rows).toEqual([["it's", -2, 3, 1e-9, false], ['x', 1, '9007199254740993', 0.5, true], [null, null, null, null, null]]);
    expect((await runQuery([T], 'SELECT count(*) AS n, sum(i) FROM t')).rows).toEqual([[3, -1]]);
  });

  it.each([
    ['two statements', 'SELECT 1; SELECT 2', /exactly one/],
    ['DDL', 'CREATE TABLE u (a INT)', /read-only/],
    ['DML', "UPDATE t SET s = 'y'", /read-only/],
    ['a setting', "SET memory_limit = '10GB'", /read-only/],
    ['an extension', 'LOAD httpfs', /read-only/],
    ['reading a file', "SELECT * FROM read_text('/etc/hostname')", /disabled by configuration/],
    ['writing a file', "COPY t TO '/tmp/a2rl-sql-engine-leak.csv'", /disabled by configuration|read-only/],
    ['attaching a database', "ATTACH '/tmp/a2rl-x.duckdb'", /disabled by configuration|read-only/],
    ['a syntax error', 'SELEC 1', /syntax error/i],
  ])('refuses %s with a QueryError', async (_what, sql, why) => {
    const err = await runQuery([T], sql).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(QueryError);
    expect(err!.message).toMatch(why);
  });

  it('stops at the row, size and time limits with an error naming the limit', async () => {
    await expect(runQuery([T], 'SELECT * FROM range(11)', { ...DEFAULT_LIMITS, maxRows: 10 })).rejects.toThrow(/more than 10 rows/);
    await expect(runQuery([T], "SELECT repeat('x', 1000) FROM range(100)", { ...DEFAULT_LIMITS, maxBytes: 10_000 })).rejects.toThrow(/over 10000 bytes/);
    await expect(runQuery([T], 'SELECT count(*) FROM range(100000000000) a, range(100000) b', { ...DEFAULT_LIMITS, timeoutMs: 500 })).rejects.toThrow(/time limit \(0.5 s\)/);
  }, 30_000);
});
