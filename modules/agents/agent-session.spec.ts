import { describe, expect, it } from '@jest/globals';
import { validate, version } from 'uuid';
import { agentSessionEnv, agentSessionId, RESUME_NOTE_MAX_CHARS } from './agent-session.js';

describe("the agent's session across a resume", () => {
  it('derives one RFC 4122 UUID per run, the same on every launch, different between runs', () => {
    const id = agentSessionId('ref-arith-20260101T000000Z-abcdef');
    expect([validate(id), version(id)]).toEqual([true, 5]);
    expect(agentSessionId('ref-arith-20260101T000000Z-abcdef')).toBe(id);
    expect(agentSessionId('ref-arith-20260101T000000Z-abcdeg')).not.toBe(id);
  });

  it('gives a first launch the session id only, and a resumed one the marker and the note', () => {
    const runId = 'ref-judge-20260101T000000Z-012345';
    expect(agentSessionEnv(runId)).toEqual({ A2RL_SESSION_ID: agentSessionId(runId) });
    expect(agentSessionEnv(runId, { note: 'Resumed: 120 s left.\nThe workspace is as it was.' })).toEqual({
      A2RL_SESSION_ID: agentSessionId(runId),
      A2RL_RESUMED: '1',
      A2RL_RESUME_NOTE: 'Resumed: 120 s left.\nThe workspace is as it was.',
    });
  });

  it('keeps the note to printable text of bounded length (it travels as an argument and a message)', () => {
    const note = agentSessionEnv('r', { note: `a\u0000b\u001b[31mc\td\n${'x'.repeat(10_000)}` }).A2RL_RESUME_NOTE;
    expect(note.startsWith('ab[31mc\td\nx')).toBe(true);
    expect(note.length).toBe(RESUME_NOTE_MAX_CHARS);
  });
});
