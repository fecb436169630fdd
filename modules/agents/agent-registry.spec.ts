import { chmodSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { adHocAgent, agentLlmSetup, agentSessionKind, checkAgent, detectDriver, listAgents, loadAgent, projectCliBin, resolveCommand, type AgentSpec } from './agent-registry.js';

function tempDir(): string {
  return realpathSync(mkdtempSync(path.join(os.tmpdir(), 'a2rl-agents-')));
}

describe('agent registry', () => {
  it('lists the reference, external and test agents, each with a start script', () => {
    const ids = listAgents().map((a) => a.id);
    expect(ids).toEqual(expect.arrayContaining([
      'reference', 'claude-code', 'codex-cli', 'gemini-cli', 'opencode', 'openhands',
      'faulty-crash', 'faulty-copy-base', 'faulty-idle', 'faulty-garbage', 'faulty-diverge',
    ]));
  });

  it('says what is missing to run an LLM agent: its command, and the key of its provider\'s upstream', () => {
    const spec: AgentSpec = { id: 'x', title: 'x', kind: 'external', requires: { commands: ['a2rl-no-such-cli'] }, llm: { providers: ['anthropic'], defaultModel: 'm' } };
    expect(checkAgent(spec, { PATH: '/nonexistent' }).missing).toEqual([
      expect.stringContaining('command "a2rl-no-such-cli"'),
      expect.stringContaining('A2RL_LLM_ANTHROPIC_KEY'),
    ]);
    expect(checkAgent(spec, { PATH: '/nonexistent', A2RL_LLM_ANTHROPIC_KEY: 'k' }).missing).toHaveLength(1);
    expect(checkAgent(loadAgent('reference'), process.env).missing).toEqual([]);
  });

  it('finds a command in the project\'s pinned CLIs before PATH, and says what the sandbox must bind', () => {
    const dir = tempDir();
    try {
      const bin = path.join(dir, 'bin');
      mkdirSync(bin);
      writeFileSync(path.join(bin, 'claude'), '#!/bin/sh\n');
      writeFileSync(path.join(bin, 'plain-tool'), '#!/bin/sh\n');
      chmodSync(path.join(bin, 'claude'), 0o755);
      chmodSync(path.join(bin, 'plain-tool'), 0o755);
      expect(resolveCommand('plain-tool', { PATH: `/nonexistent:${bin}` })).toEqual({ name: 'plain-tool', file: path.join(bin, 'plain-tool'), binDir: bin, binds: [bin] });
      const pinned = existsSync(path.join(projectCliBin(), 'claude'));
      const claude = resolveCommand('claude', { PATH: bin })!;
      expect(claude.binDir).toBe(pinned ? realpathSync(projectCliBin()) : bin);
      if (pinned) expect(claude.binds).toEqual([realpathSync(path.join(projectCliBin(), '..'))]); // the whole node_modules
      expect(resolveCommand('../bin/claude', { PATH: bin })).toBeNull();
      expect(resolveCommand('nothing-here', { PATH: bin })).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fills an adapter\'s llm section and refuses one that writes outside the home', () => {
    const setup = agentLlmSetup(
      { providers: ['openai'], defaultModel: 'gpt-x', env: { OPENAI_BASE_URL: '{gateway}/openai/v1', OPENAI_API_KEY: '{token}' }, files: { '.cfg/a.toml': 'model = "{model}"\nhome = "{home}"\n' } },
      { gateway: 'http://127.0.0.1:5001', token: 'tok', model: 'gpt-x', home: '/home/agent', workspace: '/w' },
    );
    expect(setup).toEqual({ env: { OPENAI_BASE_URL: 'http://127.0.0.1:5001/openai/v1', OPENAI_API_KEY: 'tok' }, files: { '.cfg/a.toml': 'model = "gpt-x"\nhome = "/home/agent"\n' } });
    const root = tempDir();
    try {
      for (const [id, llm] of [
        ['escapes', { providers: ['openai'], defaultModel: 'm', files: { '../../etc/x': 'y' } }],
        ['absolute', { providers: ['openai'], defaultModel: 'm', files: { '/etc/x': 'y' } }],
        ['provider', { providers: ['acme'], defaultModel: 'm' }],
        ['envname', { providers: ['openai'], defaultModel: 'm', env: { 'A=B': 'c' } }],
      ] as const) {
        mkdirSync(path.join(root, id));
        writeFileSync(path.join(root, id, 'agent.json'), JSON.stringify({ id, title: id, kind: 'external', requires: {}, llm }));
        expect(() => loadAgent(id, root)).toThrow(/llm\./);
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('every LLM adapter declares its provider, model and gateway settings', () => {
    for (const id of ['claude-code', 'codex-cli', 'gemini-cli', 'opencode', 'openhands']) {
      const llm = loadAgent(id).llm;
      expect({ id, providers: llm?.providers.length ?? 0, model: !!llm?.defaultModel, gateway: JSON.stringify(llm ?? {}).includes('{gateway}'), token: JSON.stringify(llm ?? {}).includes('{token}') })
        .toEqual({ id, providers: 1, model: true, gateway: true, token: true });
    }
  });

  it('says which agents continue their own session on resume: the four npm CLIs and OpenHands; the others (and ad-hoc commands) restart with the note', () => {
    const kinds = Object.fromEntries(listAgents().map((a) => [a.id, agentSessionKind(a)]));
    expect(Object.entries(kinds).filter(([, kind]) => kind === 'resumable').map(([id]) => id)).toEqual(['claude-code', 'codex-cli', 'gemini-cli', 'opencode', 'openhands']);
    for (const id of ['rdagent', 'reference', 'reference-trl']) expect(loadAgent(id).session).toBe('restart');
    expect(agentSessionKind(adHocAgent('echo hi'))).toBe('restart');
    const root = tempDir();
    try {
      mkdirSync(path.join(root, 'odd'));
      writeFileSync(path.join(root, 'odd', 'agent.json'), JSON.stringify({ id: 'odd', title: 'odd', kind: 'external', requires: {}, session: 'forever' }));
      expect(() => loadAgent('odd', root)).toThrow(/session must be one of resumable, restart/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
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
