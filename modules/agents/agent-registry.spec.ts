import { describe, expect, it } from '@jest/globals';
import { adHocAgent, checkAgent, detectDriver, listAgents, loadAgent } from './agent-registry.js';

describe('agent registry', () => {
  it('lists the reference, external and test agents, each with a start script', () => {
    const ids = listAgents().map((a) => a.id);
    expect(ids).toEqual(expect.arrayContaining([
      'reference', 'claude-code', 'codex-cli', 'gemini-cli', 'opencode', 'openhands',
      'faulty-crash', 'faulty-copy-base', 'faulty-idle', 'faulty-garbage', 'faulty-diverge',
    ]));
  });

  it('says what is missing to run an external agent', () => {
    const claude = checkAgent(loadAgent('claude-code'), { PATH: '/nonexistent' });
    expect(claude.missing).toEqual(['command "claude" on PATH', 'one of ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN']);
    expect(checkAgent(loadAgent('reference'), process.env).missing).toEqual([]);
  });

  it('refuses unknown agents, naming the available ones', () => {
    expect(() => loadAgent('nope')).toThrow(/unknown agent "nope" \(available: claude-code, codex-cli/);
    expect(() => loadAgent('../etc')).toThrow(/unknown agent/);
  });

  it('attributes the driver: flag, then LLM_MODEL / CHAT_MODEL / OPENAI_MODEL, then the agent default', () => {
    const spec = loadAgent('reference');
    expect(detectDriver('gpt-x', spec, { LLM_MODEL: 'a' })).toBe('gpt-x');
    expect(detectDriver(undefined, spec, { CHAT_MODEL: 'b', OPENAI_MODEL: 'c' })).toBe('b');
    expect(detectDriver(undefined, spec, { OPENAI_MODEL: 'c' })).toBe('c');
    expect(detectDriver(undefined, spec, {})).toBe('none');
    expect(detectDriver(undefined, adHocAgent('echo hi'), {})).toBeUndefined();
  });
});
