import { PassThrough } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { StatusLine } from './status-line.js';

// The one status line: redrawn in place on a terminal, plain lines (as the caller paces them) elsewhere.

function stream(tty: boolean): { s: NodeJS.WriteStream; out: () => string } {
  const s = new PassThrough() as unknown as NodeJS.WriteStream & { isTTY: boolean; columns: number };
  s.isTTY = tty;
  s.columns = 120;
  let text = '';
  (s as unknown as PassThrough).on('data', (chunk: Buffer) => (text += chunk.toString()));
  return { s, out: () => text };
}

describe('StatusLine', () => {
  it('prints plain lines when the stream is not a terminal, only those the caller marks', () => {
    const { s, out } = stream(false);
    const status = new StatusLine(s);
    status.show('one');
    status.show('skipped', false);
    status.show('two');
    status.stop();
    expect(out()).toBe('one\ntwo\n');
  });

  it('redraws one line on a terminal and ends it with a newline on stop', async () => {
    const { s, out } = stream(true);
    const status = new StatusLine(s);
    status.show('first state');
    status.show('last state');
    status.stop();
    await new Promise((resolve) => setImmediate(resolve));
    const text = out();
    expect(text).toContain('first state');
    expect(text).toContain('last state');
    expect(text.endsWith('\n')).toBe(true);
    expect(text.split('\n').filter(Boolean).length).toBe(1); // one line, rewritten (carriage return / cursor moves, no newlines between states)
  });
});
