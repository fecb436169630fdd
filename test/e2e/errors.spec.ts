import { execFile, type ExecFileOptions } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';

// Every failure to open a backend or a path, through the built `a2rl` binary: exit 2 and exactly one
// stderr line `a2rl: …` naming the variable (or path) and what to do, no stack trace; with
// A2RL_DEBUG=1 the stack follows. Needs the PostgreSQL at 127.0.0.1:5432 (trust, database `test`).
// No case depends on how long anything takes: deadlines below only stop a hung process.

const PG = 'postgres://postgres@127.0.0.1:5432';
/** Per test: several CLI starts in a row, on a machine that may be busy (a deadline, not a speed goal). */
const T = 120_000;

let scratch: string;
let closedPort: number;

/** A loopback port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('A2RL_')));
  return { ...clean, A2RL_HOME: mkdtempSync(path.join(scratch, 'home-')), ...extra };
}

function a2rl(args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  return runA2rl(args, { env: env(extra), cwd: scratch });
}

/** Exit 2 and one `a2rl:` line that contains every `names`, and no stack frame. */
function expectOneLine(r: CliResult, ...names: string[]): void {
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  expect({ code: r.code, lines: lines.length }).toEqual({ code: 2, lines: 1 });
  expect(lines[0]).toMatch(/^a2rl: /);
  for (const name of names) expect(lines[0]).toContain(name);
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'a2rl-errors-'));
  closedPort = await freePort();
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('a backend that does not open: one line naming the variable, exit 2', () => {
  it('PostgreSQL ledger on a port where nothing listens', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `postgres://postgres@127.0.0.1:${closedPort}/test` }), 'A2RL_LEDGER_URL', 'nothing is listening');
  }, T);

  it('PostgreSQL ledger naming a database that does not exist', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `${PG}/a2rl_no_such_db_${process.pid}` }), 'A2RL_LEDGER_URL', 'does not exist', 'createdb');
  }, T);

  it('PostgreSQL ledger with a schema name PostgreSQL would refuse', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `${PG}/test?schema=bad-name` }), 'A2RL_LEDGER_URL', 'schema');
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `${PG}/test?schema=pg_reserved` }), 'A2RL_LEDGER_URL', 'schema');
  }, T);

  it('PostgreSQL ledger on a host that does not exist', async () => {
    // .invalid never resolves (RFC 2606); no network is needed to learn that.
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `postgres://postgres@a2rl-no-such-host.invalid:5432/test` }), 'A2RL_LEDGER_URL', 'a2rl-no-such-host.invalid');
  }, T);

  it('KurrentDB that is down', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `kurrentdb://127.0.0.1:${closedPort}?tls=false` }), 'A2RL_LEDGER_URL', 'KurrentDB');
  }, T);

  it('a SQLite ledger URL that names a directory', async () => {
    const dir = mkdtempSync(path.join(scratch, 'dir-'));
    expectOneLine(await a2rl(['runs'], { A2RL_LEDGER_URL: `sqlite://${dir}` }), 'A2RL_LEDGER_URL', `${dir} is a directory`);
  }, T);

  it('an S3 artifacts URL without credentials, and one where nothing listens', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_ARTIFACTS_URL: `s3://127.0.0.1:${closedPort}/bucket?ssl=false` }), 'A2RL_ARTIFACTS_URL', 'credentials');
    const unreachable = await a2rl(['runs'], { A2RL_ARTIFACTS_URL: `s3://KEY:topsecret@127.0.0.1:${closedPort}/bucket?ssl=false` });
    expectOneLine(unreachable, 'A2RL_ARTIFACTS_URL', 'nothing is listening');
    expect(unreachable.stderr).not.toContain('topsecret');
  }, T);

  it('read models on a wrong PostgreSQL port, or at a directory', async () => {
    expectOneLine(await a2rl(['runs'], { A2RL_READMODEL_URL: `postgres://postgres@127.0.0.1:${closedPort}/test` }), 'A2RL_READMODEL_URL', 'nothing is listening');
    const dir = mkdtempSync(path.join(scratch, 'dir-'));
    expectOneLine(await a2rl(['runs'], { A2RL_READMODEL_URL: `sqlite://${dir}` }), 'A2RL_READMODEL_URL', 'is a directory');
  }, T);

  it('with A2RL_DEBUG=1 the line is followed by the stack and its causes', async () => {
    const r = await a2rl(['runs'], { A2RL_LEDGER_URL: `postgres://postgres@127.0.0.1:${closedPort}/test`, A2RL_DEBUG: '1' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^a2rl: A2RL_LEDGER_URL: /);
    expect(r.stderr).toMatch(/^\s+at /m);
    expect(r.stderr).toContain('ECONNREFUSED');
  }, T);
});

describe('A2RL_HOME that cannot hold the ledger', () => {
  it('is a file', async () => {
    const file = path.join(scratch, 'a-file');
    writeFileSync(file, '');
    expectOneLine(await a2rl(['runs'], { A2RL_HOME: file }), 'A2RL_HOME', 'not a directory');
    expectOneLine(await a2rl(['run', '--task', 'ref-arith', '--agent', 'reference', '--budget', '5s'], { A2RL_HOME: path.join(file, 'below') }), 'A2RL_HOME');
  }, T);

  it('is read-only', async () => {
    const home = mkdtempSync(path.join(scratch, 'ro-'));
    chmodSync(home, 0o555);
    try {
      // root writes through mode bits: as root, run a2rl as nobody (the checkout must be world-readable).
      const asRoot = process.getuid?.() === 0;
      if (asRoot && (statSync(path.resolve('dist')).mode & 0o005) !== 0o005) {
        console.warn('skipped: as root this runs a2rl as nobody, who cannot read dist/');
        return;
      }
      chmodSync(scratch, 0o755); // nobody reaches the home through it
      const r = await execA2rl(['runs'], { env: env({ A2RL_HOME: home }), ...(asRoot ? { uid: 65534, gid: 65534, cwd: '/' } : {}) });
      expectOneLine(r, 'A2RL_HOME', `${home} is not writable`);
    } finally {
      chmodSync(home, 0o755);
      chmodSync(scratch, 0o700);
    }
  }, T);
});

describe('paths and ports named on the command line', () => {
  it('export -o into a directory that does not exist, or onto a directory', async () => {
    expectOneLine(await a2rl(['export', 'any-run', '-o', '/nonexistent/x.tgz']), '-o /nonexistent/x.tgz', 'does not exist');
    expectOneLine(await a2rl(['export', 'any-run', '-o', scratch]), `-o ${scratch}`, 'is a directory');
  }, T);

  it('serve on a port already in use exits at once with one line', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = blocker.address() as net.AddressInfo;
      const r = await execA2rl(['serve'], { env: env({ A2RL_HTTP_PORT: String(port) }) });
      expectOneLine(r, 'A2RL_HTTP_PORT', 'in use');
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  }, T);
});

/** The built CLI with spawn options runA2rl lacks; a deadline that only a hung process reaches (a2rl serve would run forever). */
function execA2rl(args: string[], options: ExecFileOptions): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [A2RL_BIN, ...args], { cwd: scratch, timeout: 90_000, killSignal: 'SIGKILL', ...options, encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}
