import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';
import { installedAnalysisPython } from '../../modules/analytics/analysis-python.js';
import { BUILT_IN_TABLES } from '../../modules/analytics/table-schemas.js';

// `a2rl query` and `a2rl export-tables` over real runs of the test agents (seconds each), the same
// counts as the REST API (GET /runs) and GET /query for operators, and the Parquet files read back
// by pyarrow with the documented schema (docs/analysis.md "Tables for SQL and dataframes").

const T = 180_000;
let home: string;
const env = () => ({ ...process.env, A2RL_HOME: home });
const a2rl = (args: string[]): Promise<CliResult> => runA2rl(args, { env: env() });
const runIds: string[] = [];

async function ok(args: string[]): Promise<string> {
  const r = await a2rl(args);
  if (r.code !== 0) throw new Error(`a2rl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

async function query(sql: string): Promise<{ columns: { name: string; type: string }[]; rows: unknown[][] }> {
  return JSON.parse(await ok(['query', sql, '--json']));
}

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-sql-'));
  // Three finished runs of two agents: a copy of the base model (one submission) twice, an idle agent (none).
  for (const [agent, budget] of [['faulty-copy-base', '20s'], ['faulty-copy-base', '20s'], ['faulty-idle', '2s']]) {
    const out = await ok(['run', '--task', 'ref-arith', '--agent', agent, '--budget', budget, '--json']);
    runIds.push((JSON.parse(out.trim().split('\n').pop()!) as { runId: string }).runId);
  }
}, T);

afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('a2rl query', () => {
  it('answers SQL over runs, submissions and events with the counts of the ledger', async () => {
    const runs = await query('SELECT agent, count(*) AS n, sum(submissions) AS subs FROM runs GROUP BY agent ORDER BY agent');
    expect(runs.rows).toEqual([['faulty-copy-base', 2, 2], ['faulty-idle', 1, 0]]);
    const subs = await query("SELECT count(*) FROM submissions WHERE is_copy_of_base AND status = 'graded'");
    expect(subs.rows).toEqual([[2]]);
    // The events table holds every event of every run: its count per run is the run's event count.
    const counts = await query('SELECT r.run_id, r.event_count, count(e.seq) AS n, max(e.seq) AS last FROM runs r JOIN events e USING (run_id) GROUP BY ALL ORDER BY 1');
    expect(counts.rows.map((r) => r[1])).toEqual(counts.rows.map((r) => r[2]));
    expect(counts.rows.map((r) => r[3])).toEqual(counts.rows.map((r) => (r[1] as number) - 1));
    // The ledger's own view of the same run agrees with the events table's.
    const events = (await ok(['events', runIds[0], '--json'])).trim().split('\n').map((l) => JSON.parse(l) as { type: string; id: string });
    const types = await query(`SELECT type, event_id FROM events WHERE run_id = '${runIds[0]}' ORDER BY seq`);
    expect(types.rows).toEqual(events.map((e) => [e.type, e.id]));
  }, T);

  it('text, JSON and CSV outputs; schemas as documented', async () => {
    const described = await query('DESCRIBE runs');
    expect(described.rows.map((r) => [r[0], r[1]])).toEqual(BUILT_IN_TABLES[0].columns.map((c) => [c.name, c.type]));
    const text = await ok(['query', 'SELECT agent, count(*) AS n FROM runs GROUP BY agent ORDER BY agent']);
    expect(text).toBe('agent             n\nfaulty-copy-base  2\nfaulty-idle       1\n(2 rows)\n');
    const csv = await ok(['query', "SELECT '=1+1' AS formula, 'a,b' AS comma", '--csv']);
    expect(csv).toBe("formula,comma\r\n'=1+1,\"a,b\"\r\n");
  }, T);

  it('refuses what is not one read-only statement, file and extension access, and stops at its limits, each in one line', async () => {
    const refused = async (args: string[], why: RegExp) => {
      const r = await a2rl(['query', ...args]);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(why);
    };
    const leak = path.join(home, 'leak.csv');
    await refused([`COPY runs TO '${leak}'`], /disabled by configuration|read-only/);
    await refused(["SELECT * FROM read_csv('/etc/passwd')"], /disabled by configuration/);
    await refused(["ATTACH '/tmp/x.db'"], /disabled by configuration|read-only/);
    await refused(['INSTALL httpfs'], /read-only/);
    await refused(['SET enable_external_access = true'], /read-only/);
    await refused(['SELECT 1; SELECT 2'], /exactly one/);
    await refused(['DELETE FROM runs'], /read-only/);
    await refused(['SELECT * FROM range(1000)', '--max-rows', '10'], /row limit/);
    await refused(['SELECT count(*) FROM range(100000000000) a, range(100000) b', '--timeout', '1'], /time limit/);
    expect(() => readFileSync(leak)).toThrow();
  }, T);
});

describe('a2rl export-tables', () => {
  it('writes Parquet that pyarrow reads back with the documented schema and row counts', async () => {
    const python = installedAnalysisPython();
    if (!python) {
      console.warn('skipped: the analysis readers (pyarrow, infra/analysis-python) are not installed; npm test installs them');
      return;
    }
    const dir = path.join(home, 'tables');
    const written = JSON.parse(await ok(['export-tables', '-o', dir, '--format', 'parquet', '--json'])) as { table: string; file: string; rows: number }[];
    expect(written.map((w) => w.table)).toEqual(BUILT_IN_TABLES.map((t) => t.name));
    const script = path.join(home, 'read.py');
    writeFileSync(script, [
      'import json, sys, pyarrow.parquet as pq',
      'out = {}',
      'for f in sys.argv[1:]:',
      '    t = pq.read_table(f)',
      '    out[f] = {"rows": t.num_rows, "schema": [[c.name, str(c.type)] for c in t.schema]}',
      'print(json.dumps(out))',
    ].join('\n'));
    const read = JSON.parse(execFileSync(python, [script, ...written.map((w) => w.file)], { encoding: 'utf8' })) as Record<string, { rows: number; schema: string[][] }>;
    const arrow: Record<string, string> = { VARCHAR: 'string', INTEGER: 'int32', BIGINT: 'int64', DOUBLE: 'double', BOOLEAN: 'bool' };
    for (const [i, spec] of BUILT_IN_TABLES.entries()) {
      const got = read[written[i].file];
      expect({ table: spec.name, schema: got.schema }).toEqual({ table: spec.name, schema: spec.columns.map((c) => [c.name, arrow[c.type]]) });
      expect({ table: spec.name, rows: got.rows }).toEqual({ table: spec.name, rows: written[i].rows });
    }
    const n = (sql: string) => query(sql).then((r) => r.rows[0][0]);
    expect(read[written[0].file].rows).toBe(await n('SELECT count(*) FROM runs'));
    expect(read[written[3].file].rows).toBe(await n('SELECT count(*) FROM events'));
    // A second export into the same directory replaces nothing.
    const again = await a2rl(['export-tables', '-o', dir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
  }, T);

  it('writes CSV with a header of the documented columns', async () => {
    const dir = path.join(home, 'csv');
    await ok(['export-tables', '-o', dir, '--format', 'csv']);
    const runs = readFileSync(path.join(dir, 'runs.csv'), 'utf8').split('\r\n');
    expect(runs[0]).toBe(BUILT_IN_TABLES[0].columns.map((c) => c.name).join(','));
    expect(runs.filter((l) => l !== '')).toHaveLength(1 + runIds.length);
  }, T);
});

describe('user projections through the CLI', () => {
  it('a registered projection is a table for a2rl query; a malformed one is refused in one line and changes nothing', async () => {
    const added = JSON.parse(await ok(['projections', 'add', path.resolve('docs/examples/tokens-per-point.mjs'), '--json'])) as { name: string; rows: number };
    expect(added).toMatchObject({ name: 'tokens_per_point', rows: 1 });
    expect((await query('SELECT driver, runs, output_tokens FROM tokens_per_point')).rows).toEqual([['none', 3, 0]]);

    const before = { runs: await ok(['query', 'SELECT * FROM runs ORDER BY run_id', '--json']), listing: readdirSync(path.join(home, 'projections')).sort() };
    const bad = path.join(home, 'bad.mjs');
    writeFileSync(bad, "export const name = 'bad'; export const version = 1; export const columns = { n: 'INTEGER' }; export const initialState = 0; export const evolve = (s) => s + 1; export const rows = (s) => [{ n: String(s) }];");
    const r = await a2rl(['projections', 'add', bad]);
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^a2rl: projection bad\.mjs: rows\(\)\[0\]\.n is not of type INTEGER/)]);
    expect({ runs: await ok(['query', 'SELECT * FROM runs ORDER BY run_id', '--json']), listing: readdirSync(path.join(home, 'projections')).sort() }).toEqual(before);
    const missing = await a2rl(['query', 'SELECT * FROM bad']);
    expect(missing.stderr).toMatch(/Table with name bad does not exist/);
  }, T);
});

describe('GET /query (a2rl serve)', () => {
  let server: ChildProcess | undefined;
  let base = '';

  beforeAll(async () => {
    const port = await freePort();
    server = spawn(process.execPath, [A2RL_BIN, 'serve'], { env: { ...env(), A2RL_HTTP_PORT: String(port), A2RL_HTTP_HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      server!.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('listening')) resolve();
      });
      server!.once('exit', (code) => reject(new Error(`a2rl serve exited (${code})`)));
    });
    base = `http://127.0.0.1:${port}`;
  }, T);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server!.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
  });

  it('gives the same counts as GET /runs (and the CLI), refuses a write with 400, and records each query in the access stream', async () => {
    const runs = (await (await fetch(`${base}/runs?limit=200`)).json()) as { total: number; items: { agent: string }[] };
    const byAgent = (await (await fetch(`${base}/runs?agent=faulty-idle`)).json()) as { total: number };
    const sql = async (q: string) => (await (await fetch(`${base}/query?sql=${encodeURIComponent(q)}`)).json()) as { rows: unknown[][] };
    expect((await sql('SELECT count(*) FROM runs')).rows).toEqual([[runs.total]]);
    expect((await sql("SELECT count(*) FROM runs WHERE agent = 'faulty-idle'")).rows).toEqual([[byAgent.total]]);
    // The CLI answers the same.
    expect((await query('SELECT count(*) FROM runs')).rows).toEqual([[runs.total]]);
    const bad = await fetch(`${base}/query?sql=${encodeURIComponent('DROP TABLE runs')}`);
    expect(bad.status).toBe(400);
    const csv = await fetch(`${base}/query?format=csv&sql=${encodeURIComponent('SELECT 1 AS one')}`);
    expect(await csv.text()).toBe('one\r\n1\r\n');
    const access = (await ok(['access', '--json'])).trim();
    const records = access.split('\n').map((l) => (JSON.parse(l) as { data: { action: string; outcome: string; detail?: string } }).data);
    const queries = records.filter((r) => r.action === 'query');
    expect(queries.map((r) => r.outcome)).toEqual(['ok', 'ok', 'refused', 'ok']);
    expect(queries[0].detail).toBe('1 rows; sql: SELECT count(*) FROM runs');
  }, T);

  it('keeps the user projections live: a run recorded while it serves shows in their tables', async () => {
    const sql = async (q: string) => (await (await fetch(`${base}/query?sql=${encodeURIComponent(q)}`)).json()) as { rows: unknown[][] };
    expect((await sql('SELECT runs FROM tokens_per_point')).rows).toEqual([[3]]);
    await ok(['run', '--task', 'ref-arith', '--agent', 'faulty-idle', '--budget', '2s', '--json']);
    await eventually('the projection to count the new run', async () => ((await sql('SELECT runs FROM tokens_per_point')).rows[0]?.[0] === 4 ? true : undefined));
  }, T);
});

describe('a2rl analysis tables', () => {
  it("regenerates the tables of a 2-task × 2-seed campaign, agreeing with the scoreboard, each value citing the campaign's runs", async () => {
    const out = await ok(['campaign', 'run', '--tasks', 'ref-arith,ref-judge', '--agents', 'faulty-copy-base', '--seeds', '2', '--budget', '20s', '--json']);
    const campaign = JSON.parse(out.trim().split('\n').pop()!) as { campaignId: string; runs: { runId: string }[] };
    const report = JSON.parse(await ok(['analysis', 'tables', '--campaign', campaign.campaignId, '--format', 'json'])) as { runs: { runId: string; seed: number; level: string }[]; tables: { id: string; rows: { value: unknown; runs: string[] }[][] }[] };
    const board = JSON.parse(await ok(['scoreboard', '--campaign', campaign.campaignId, '--json'])) as { task: string; best: { mean: number }; improvement: number; runIds: string[] }[];
    const improvement = report.tables.find((t) => t.id === 'improvement')!;
    expect(improvement.rows.map((r) => [r[0].value, r[3].value, r[5].value, r[8].value, r[8].runs])).toEqual(board.map((b) => [b.task, 2, b.best.mean, b.improvement, [...b.runIds].sort()]));
    // A copy of the base model improves nothing: 0 points, route copy_model, class copy_model_fallback, on both levels.
    expect(improvement.rows.map((r) => r[8].value)).toEqual([0, 0]);
    const routes = report.tables.find((t) => t.id === 'routes')!;
    expect(routes.rows.map((r) => r[6].value)).toEqual([2, 2]);
    const levels = report.tables.find((t) => t.id === 'by_level')!;
    expect(levels.rows.map((r) => [r[0].value, r[2].value, r[3].value])).toEqual([['L1', 2, 0], ['L2', 2, 0]]);
    expect(report.runs.map((r) => r.runId).sort()).toEqual(campaign.runs.map((r) => r.runId).sort());
    expect(report.runs.map((r) => [r.level, r.seed])).toEqual([['L1', 0], ['L1', 1], ['L2', 0], ['L2', 1]]);
    const html = path.join(home, 'tables.html');
    await ok(['analysis', 'tables', '--campaign', campaign.campaignId, '--format', 'html', '-o', html]);
    expect(readFileSync(html, 'utf8').match(/<svg /g)).toHaveLength(3);
    // The SQL tables scoped to the same campaign hold exactly its runs.
    expect(JSON.parse(await ok(['query', 'SELECT count(*), count(DISTINCT campaign_cell) FROM runs', '--campaign', campaign.campaignId, '--json'])).rows).toEqual([[4, 4]]);
    expect(JSON.parse(await ok(['query', "SELECT count(DISTINCT run_id) FROM events WHERE type = 'RunScheduled'", '--campaign', campaign.campaignId, '--json'])).rows).toEqual([[4]]);
    const md = await ok(['analysis', 'tables', '--campaign', campaign.campaignId]);
    expect(md).toMatch(/^# Analysis tables: campaign cmp-/);
    expect(md).toContain('| R4 |');
  }, T);
});

async function eventually<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 60_000; // only so that a broken server cannot hang the suite
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
