import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from './config.js';

describe('configuration from the environment', () => {
  it('defaults to embedded stores under A2RL_HOME', () => {
    const c = loadConfig({ A2RL_HOME: '/tmp/a2rl-home' });
    expect(c).toMatchObject({
      home: '/tmp/a2rl-home',
      ledgerUrl: 'sqlite:///tmp/a2rl-home/ledger.db',
      artifactsUrl: 'file:///tmp/a2rl-home/artifacts',
      readModelUrl: 'sqlite:///tmp/a2rl-home/readmodels.db',
    });
    expect(loadConfig({}).home).toBe(path.resolve('.a2rl'));
  });

  it('accepts every documented backend URL', () => {
    for (const url of ['postgres://u@127.0.0.1:5432/db', 'kurrentdb://127.0.0.1:2113?tls=false', 'esdb://h:2113?tls=false']) {
      expect(loadConfig({ A2RL_LEDGER_URL: url }).ledgerUrl).toBe(url);
    }
    expect(loadConfig({ A2RL_ARTIFACTS_URL: 's3://ak:sk@127.0.0.1:9000/a2rl' }).artifactsUrl).toContain('s3://');
    expect(loadConfig({ A2RL_READMODEL_URL: 'postgres://127.0.0.1/test' }).readModelUrl).toContain('postgres://');
  });

  it.each([
    ['A2RL_LEDGER_URL', 'mysql://x'],
    ['A2RL_LEDGER_URL', 'not a url'],
    ['A2RL_ARTIFACTS_URL', 's3://127.0.0.1:9000'],
    ['A2RL_ARTIFACTS_URL', 's3://127.0.0.1:9000/bucket'], // no credentials
    ['A2RL_LEDGER_URL', 'postgres://h/db?schema=bad-name'],
    ['A2RL_READMODEL_URL', 'postgres://h/db?schema=pg_catalog'],
    ['A2RL_LEDGER_URL', 'postgres://h/db?pool=abc'],
    ['A2RL_LEDGER_URL', 'postgres://h/db?pool=0'],
    ['A2RL_ARTIFACTS_URL', 'http://minio'],
    ['A2RL_READMODEL_URL', 'kurrentdb://h:2113'],
    ['A2RL_HTTP_PORT', '99999'],
    ['A2RL_TREE_HEAD_EVERY', '10 seconds'],
    ['A2RL_TREE_HEAD_EVERY', '10s,0'],
    ['A2RL_TREE_HEAD_EVERY', '10s,5s'],
    ['A2RL_TREE_HEAD_EVERY', '0s'],
  ])('fails at start naming %s for %s', (variable, value) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [variable]: value })).toThrow(new RegExp(`^${variable}: `));
  });

  it('reads how often runs sign tree heads from A2RL_TREE_HEAD_EVERY (default 10 s or 10,000 events)', () => {
    expect(loadConfig({}).treeHeadEvery).toEqual({ ms: 10_000, events: 10_000 });
    expect(loadConfig({ A2RL_TREE_HEAD_EVERY: '2m,500' }).treeHeadEvery).toEqual({ ms: 120_000, events: 500 });
    expect(loadConfig({ A2RL_TREE_HEAD_EVERY: '250ms' }).treeHeadEvery).toEqual({ ms: 250, events: 10_000 });
    expect(loadConfig({ A2RL_TREE_HEAD_EVERY: '64' }).treeHeadEvery).toEqual({ ms: 10_000, events: 64 });
  });
});
