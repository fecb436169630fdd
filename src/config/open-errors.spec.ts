import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { checkHome, checkOutputFile, OpenError, openFailure } from './open-errors.js';

// What the operator reads when something the configuration names does not open: the variable, what
// happened, what to do, on one line. The CLI runs of test/e2e/errors.spec.ts cover the real backends;
// these cover the answers that need a server in a particular state (wrong password, denied bucket).

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
const wrapped = (inner: unknown) => new Error('postgres event store unavailable: cannot open schema "a2rl"\nat h:5432', { cause: inner });

describe('openFailure', () => {
  const ledger = (url: string) => ({ variable: 'A2RL_LEDGER_URL', what: 'ledger', url });

  it('names the variable and the server, hides the password, and keeps the adapter error as its cause', () => {
    const inner = pgError('28P01', 'password authentication failed for user "u"');
    const err = openFailure(ledger('postgres://u:hunter2@db.example:6432/app'), wrapped(inner));
    expect(err).toBeInstanceOf(OpenError);
    expect(err.message).toMatch(/^A2RL_LEDGER_URL: cannot open the ledger at postgres:\/\/u:\*\*\*@db\.example:6432\/app: the server refused user "u" .*correct the user or password in A2RL_LEDGER_URL$/);
    expect(err.message).not.toContain('hunter2');
    expect(err.message).not.toContain('\n');
    expect((err.cause as Error).cause).toBe(inner);
  });

  it('reads the code of every address tried (AggregateError) and of nested causes', () => {
    const refused = new AggregateError([pgError('ECONNREFUSED', 'connect ECONNREFUSED ::1:5432'), pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')], '');
    expect(openFailure(ledger('postgres://localhost/test'), wrapped(refused)).message).toContain('nothing is listening at localhost:5432');
    expect(openFailure(ledger('postgres://10.0.0.9/test'), wrapped(new Error('Connection terminated due to connection timeout'))).message).toContain('no answer from 10.0.0.9:5432 (timed out)');
    expect(openFailure(ledger('postgres://u@h/test'), wrapped(pgError('42501', 'permission denied for database test'))).message).toContain('?schema=');
  });

  it('tells S3 credentials that were refused from an unreachable server', () => {
    const target = { variable: 'A2RL_ARTIFACTS_URL', what: 'artifact store', url: 's3://AK:SK@minio:9000/bucket?ssl=false' };
    expect(openFailure(target, new Error('cannot use the bucket', { cause: pgError('InvalidAccessKeyId', 'The access key ID you provided does not exist') })).message).toContain('correct ACCESS_KEY:SECRET_KEY in A2RL_ARTIFACTS_URL');
  });

  it('falls back to the innermost message for anything else', () => {
    expect(openFailure(ledger('postgres://h/db'), wrapped(new Error('something odd'))).message).toMatch(/something odd; check that PostgreSQL at h:5432 is up, or correct A2RL_LEDGER_URL$/);
  });
});

describe('paths', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-open-errors-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('checkHome creates a missing home and refuses a file', () => {
    expect(() => checkHome(path.join(dir, 'new', 'home'))).not.toThrow();
    const file = path.join(dir, 'file');
    writeFileSync(file, '');
    expect(() => checkHome(file)).toThrow(/^A2RL_HOME: .*file is not a directory/);
    expect(() => checkHome(path.join(file, 'below'))).toThrow(OpenError);
  });

  it('checkOutputFile wants an existing directory and a file name', () => {
    expect(() => checkOutputFile('-o', path.join(dir, 'x.tgz'))).not.toThrow();
    expect(() => checkOutputFile('-o', path.join(dir, 'missing', 'x.tgz'))).toThrow(/^-o .*: directory .*missing does not exist; create it/);
    expect(() => checkOutputFile('-o', dir)).toThrow(/is a directory/);
  });
});
