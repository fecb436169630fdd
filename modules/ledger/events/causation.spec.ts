import { describe, expect, it } from '@jest/globals';
import { causedBy, causeOf, ShellCallIndex, ToolCallIndex } from './causation.js';
import type { Cause, LlmToolCall } from './catalog.js';
import { validatePayload } from './envelope.js';
import { eventId } from './ids.js';

const stored = (seq: number) => ({ id: eventId('r1', seq), seq });
const call = (seq: number): Cause => ({ event: eventId('r1', seq), seq });

describe('causeOf', () => {
  it('names a stored event by id and seq, with the evidence given (the command cut at 1000 characters)', () => {
    expect(causeOf(stored(7), { pid: 42 })).toEqual({ event: eventId('r1', 7), seq: 7, pid: 42 });
    expect(causeOf(stored(7), { command: 'x'.repeat(1500) })!.command).toHaveLength(1000);
    expect(causeOf(stored(7), { submissionId: undefined })).toEqual({ event: eventId('r1', 7), seq: 7 });
  });

  it('leaves the link out when the recorder gave no stored event (a fake, a failed append)', () => {
    expect(causeOf(undefined)).toBeUndefined();
    expect(causeOf({ seq: 1 })).toBeUndefined();
    expect(causedBy(null, { pid: 1 })).toEqual({});
  });

  it('makes a causedBy the catalog accepts on a ProcessExited, and refuses a malformed one', () => {
    const exit = { pid: 42, durationMs: 5, observedAt: '2026-01-01T00:00:00.000Z' };
    expect(() => validatePayload('ProcessExited', { ...exit, ...causedBy(stored(3), { pid: 42 }) })).not.toThrow();
    expect(() => validatePayload('ProcessExited', { ...exit, causedBy: { event: 'not-a-uuid', seq: 3 } })).toThrow(/causedBy/);
    expect(() => validatePayload('ProcessExited', { ...exit, causedBy: { ...call(3), why: 'x' } })).toThrow();
  });
});

describe('ToolCallIndex', () => {
  const bash = (id: string, command: unknown): LlmToolCall => ({ id, name: 'Bash', input: JSON.stringify({ command }) });

  it('links a model call to the earlier call whose tool call its first known tool result answers', () => {
    const index = new ToolCallIndex();
    index.noteCalls(call(4), [bash('toolu_1', 'ls'), { name: 'Read', input: '{}' }]);
    index.noteCalls(call(9), [bash('toolu_2', 'pwd')]);
    expect(index.answered({ toolResults: [{ id: 'unknown', output: '' }, { id: 'toolu_2', output: '/w' }] })).toEqual({ ...call(9), toolCallId: 'toolu_2' });
    expect(index.answered({ toolResults: [{ id: 'toolu_1', output: 'a' }] })).toEqual({ ...call(4), toolCallId: 'toolu_1' });
    expect(index.answered({ toolResults: [{ output: 'no id' }] })).toBeUndefined();
  });
});

describe('ShellCallIndex', () => {
  const bash = (id: string, command: unknown): LlmToolCall => ({ id, name: 'Bash', input: JSON.stringify({ command }) });

  it('links a process to the shell tool call whose command is one argv entry or the whole argv, once, when its call is stored', async () => {
    const index = new ShellCallIndex();
    index.noteCalls(Promise.resolve(stored(4)), [bash('toolu_1', 'python train.py --epochs 3'), bash('toolu_2', ['bash', '-lc', 'make eval'])]);
    expect(await index.startedBy(['bash', '-c', 'python train.py --epochs 3'])).toEqual({ ...call(4), toolCallId: 'toolu_1', command: 'python train.py --epochs 3' });
    expect(await index.startedBy(['bash', '-c', 'python train.py --epochs 3'])).toBeUndefined(); // its child, or a rerun: linked once
    expect(await index.startedBy(['make', 'eval'])).toEqual({ ...call(4), toolCallId: 'toolu_2', command: 'make eval' });
    expect(await index.startedBy(['python', 'train.py'])).toBeUndefined(); // a part of a command is no match
  });

  it('matches only the commands noted before the process was queued, and leaves the link out when the call was not stored', async () => {
    const index = new ShellCallIndex();
    index.noteCalls(Promise.reject(new Error('append failed')), [bash('t1', 'make a')]);
    const before = index.noted;
    index.noteCalls(stored(5), [bash('t2', 'make b')]);
    expect(await index.startedBy(['make', 'b'], before)).toBeUndefined(); // queued after the process: never waited for
    expect(await index.startedBy(['make', 'a'], before)).toBeUndefined(); // its call failed to be stored
    expect(await index.startedBy(['make', 'b'])).toEqual({ ...call(5), toolCallId: 't2', command: 'make b' });
  });

  it('takes no command from an input that is not JSON (cut) or has none', async () => {
    const index = new ShellCallIndex();
    index.noteCalls(stored(1), [{ id: 't', name: 'Bash', input: '{"command": "python tr' }, { id: 'u', name: 'Edit', input: '{"path":"a"}' }, bash('v', 'x')]);
    expect(index.noted).toBe(0);
    expect(await index.startedBy(['python', 'tr'])).toBeUndefined();
  });
});
