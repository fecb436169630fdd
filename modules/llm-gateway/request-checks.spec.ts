import { describe, expect, it } from '@jest/globals';
import { modelNameProblem, requestTarget } from './request-checks.js';

const params = (provider: string) => ({ anthropic: ['beta'], gemini: ['alt', 'key'] })[provider];

describe('requestTarget', () => {
  it('takes a plain target apart, re-encoding its query', () => {
    const target = requestTarget('/anthropic/v1/messages?beta=true', params);
    expect(typeof target === 'string' ? target : [target.provider, target.path, target.query.toString()]).toEqual(['anthropic', '/v1/messages', 'beta=true']);
    const smuggled = requestTarget('/gemini/v1beta/models/m:generateContent?alt=sse%26key%3Dx;upload=1', params);
    expect(typeof smuggled === 'string' ? smuggled : smuggled.query.toString()).toBe('alt=sse%26key%3Dx%3Bupload%3D1');
  });

  it.each([
    '/anthropic/v1/../v1/messages',
    '/anthropic/v1/./messages',
    '/anthropic/v1/.../messages',
    '/anthropic//v1/messages',
    '/anthropic/v1/%2e%2e/messages',
    '/anthropic/v1/messages%2Fx',
    '/anthropic/v1\\messages',
    '/anthropic/v1/messages#x',
    '/anthropic/v1/messages?beta=1&beta=2',
    '/anthropic/v1/messages?project=x',
    '/openai/v1/chat/completions?x=1',
    'http://example.com/anthropic/v1/messages',
  ])('refuses %s', (raw) => {
    expect(typeof requestTarget(raw, params)).toBe('string');
  });
});

describe('modelNameProblem', () => {
  it.each(['claude-sonnet-4-5-20250929', 'gpt-4o', 'ft:gpt-4o-mini:org:x:1', 'claude-sonnet-4-5@20250929', 'gemini-2.5-pro', 'Qwen2.5-0.5B+lora'])('takes %s', (name) => {
    expect(modelNameProblem(name, 'path')).toBeNull();
  });

  it('takes provider/model in a body, never in a path', () => {
    expect(modelNameProblem('meta-llama/Llama-3.1-8B-Instruct', 'body')).toBeNull();
    expect(modelNameProblem('meta-llama/Llama-3.1-8B-Instruct', 'path')).not.toBeNull();
  });

  it.each(['', '..', '../x', 'a//b', '/abs', 'a/', 'x y', 'x\u001b[31m', 'x?y', 'x%2Fy', 'x#y', '-flag', 'a'.repeat(201)])('refuses %j', (name) => {
    expect(modelNameProblem(name, 'body')).not.toBeNull();
  });
});
