import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { StaticController } from './static.controller.js';

describe('StaticController', () => {
  it('answers GET / with 503 and one line saying how to build the dashboard when it is not built', async () => {
    const empty = await mkdtemp(path.join(os.tmpdir(), 'a2rl-no-dashboard-'));
    try {
      const controller = new StaticController();
      Object.assign(controller, { root: empty });
      const sent: { status?: number; type?: string; body?: string } = {};
      const res = {
        headersSent: false,
        status: (code: number) => ((sent.status = code), res),
        type: (type: string) => ((sent.type = type), res),
        send: (body: string) => (sent.body = body),
        setHeader: () => undefined,
        sendFile: () => {
          throw new Error('no file should be sent');
        },
      };
      await controller.index(res);
      expect(sent).toEqual({ status: 503, type: 'text/plain; charset=utf-8', body: expect.stringMatching(/^the dashboard is not built: run `npm run build`[^\n]*\n$/) });
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
