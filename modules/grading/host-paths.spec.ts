import { describe, expect, it } from '@jest/globals';
import type { ActiveRun } from './run-registry.js';
import { hideHostPaths } from './submission.service.js';

describe('hideHostPaths: grading errors tell the agent nothing about the host', () => {
  const run = { ctx: { privateDir: '/root/.a2rl/tasks/ref-arith/private', workspace: { root: '/root/.a2rl/workspaces/run-1' } } } as unknown as ActiveRun;

  it('names the staged checkpoint and the held-out set, hides other host paths, keeps workspace paths and URLs', () => {
    const message = [
      "ENOENT: no such file or directory, open '/root/.a2rl/tasks/ref-arith/private/test.jsonl'",
      'bad weights in /root/.a2rl/grading-staging/a2rl-submission-x1/weights.json',
      'see /etc/passwd and /root/.a2rl/ledger.db',
      'your file /root/.a2rl/workspaces/run-1/output/ck/manifest.json',
      'server http://127.0.0.1:8000/v1/completions failed',
    ].join('\n');
    expect(hideHostPaths(message, run, '/root/.a2rl/grading-staging/a2rl-submission-x1').split('\n')).toEqual([
      "ENOENT: no such file or directory, open '<held-out data>/test.jsonl'",
      'bad weights in <submitted checkpoint>/weights.json',
      'see <host path> and <host path>',
      'your file /root/.a2rl/workspaces/run-1/output/ck/manifest.json',
      'server http://127.0.0.1:8000/v1/completions failed',
    ]);
  });
});
