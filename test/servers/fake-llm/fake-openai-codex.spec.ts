import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { projectCliBin } from '../../../modules/agents/agent-registry.js';
import { AGENT_UID, closeWhileHanging, filesUnder, prepareDirectRun, runStartScript } from './direct-run.js';
import { startFakeOpenAI } from './fake-openai.js';
import type { FakeLlmServer } from './types.js';

const KEY = 'fake-gateway-token-openai-codex';

async function post(url: string, body: unknown, key = KEY): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

const bash = { type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command', 'description'] } } };

describe('fake OpenAI API', () => {
  let fake: FakeLlmServer | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('shapes the shell call by the tool schema: a required description, an argv array for `shell`', async () => {
    fake = await startFakeOpenAI({ script: ['ls -la'] });
    const chat = await post(`${fake.url}/v1/chat/completions`, { model: 'm', tools: [bash], messages: [{ role: 'user', content: 'go' }] });
    const call = (JSON.parse(chat.text) as { choices: Array<{ message: { tool_calls: Array<{ function: { arguments: string } }> } }> }).choices[0].message.tool_calls[0];
    expect(JSON.parse(call.function.arguments)).toEqual({ command: 'ls -la', description: 'Step 1 of the script' });
    const shell = { type: 'function', name: 'shell', parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] } };
    const responses = await post(`${fake.url}/v1/responses`, { model: 'm', tools: [shell], input: 'go' });
    const item = (JSON.parse(responses.text) as { output: Array<{ type: string; arguments: string }> }).output[0];
    expect([item.type, JSON.parse(item.arguments)]).toEqual(['function_call', { command: ['bash', '-lc', 'ls -la'] }]);
  });

  it('streams chat chunks ending with [DONE], with a usage chunk only when stream_options asks for it', async () => {
    fake = await startFakeOpenAI({ script: [], finalText: 'Hello there.' });
    const without = await post(`${fake.url}/v1/chat/completions`, { model: 'm', stream: true, tools: [bash], messages: [{ role: 'user', content: 'go' }] });
    const withUsage = await post(`${fake.url}/v1/chat/completions`, { model: 'm', stream: true, stream_options: { include_usage: true }, tools: [bash], messages: [{ role: 'user', content: 'go' }] });
    const chunks = (text: string) => text.split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
    expect(chunks(without.text).at(-1)).toBe('[DONE]');
    expect(without.text.includes('"usage"')).toBe(false);
    const usageChunk = JSON.parse(chunks(withUsage.text).at(-2)!) as { choices: unknown[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect([usageChunk.choices.length, usageChunk.usage.prompt_tokens, usageChunk.usage.completion_tokens]).toEqual([0, 1100, 51]);
    // The first stream asked for no usage and got none: the fake records none reported.
    expect(fake.calls.map((c) => c.usage)).toEqual([undefined, { input: 1100, output: 51 }]);
  });

  it('lists models, refuses unknown paths (404) and wrong keys (401 invalid_api_key)', async () => {
    fake = await startFakeOpenAI({ script: [], expectKey: KEY, model: 'gpt-listed' });
    const models = await fetch(`${fake.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(((await models.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(['gpt-listed']);
    const unknown = await post(`${fake.url}/v1/embeddings`, {});
    const wrong = await post(`${fake.url}/v1/responses`, { model: 'm', input: 'hi' }, 'sk-other');
    expect([unknown.status, wrong.status]).toEqual([404, 401]);
    expect((JSON.parse(wrong.text) as { error: { code: string } }).error.code).toBe('invalid_api_key');
    expect(fake.calls.map((c) => [c.path, c.status, c.authOk])).toEqual([
      ['/v1/models', 200, true],
      ['/v1/embeddings', 404, true],
      ['/v1/responses', 401, false],
    ]);
  });

  it('answers 500 server_error in error mode and never answers in hang mode (close() ends the request)', async () => {
    fake = await startFakeOpenAI({ script: ['echo x'], mode: 'error' });
    const failed = await post(`${fake.url}/v1/responses`, { model: 'm', input: 'hi' });
    expect([failed.status, (JSON.parse(failed.text) as { error: { type: string } }).error.type]).toEqual([500, 'server_error']);
    expect(fake.calls[0].usage).toBeUndefined();
    await fake.close();

    fake = await startFakeOpenAI({ script: ['echo x'], mode: 'hang' });
    const hung = fake;
    fake = undefined;
    expect(await closeWhileHanging(hung, post(`${hung.url}/v1/chat/completions`, { model: 'm', stream: true, messages: [] }))).toBe('failed');
  });
});

/**
 * The real Codex CLI (infra/agent-clis, pinned) run the way the harness runs it: start.sh with only
 * the environment and home files agent.json's `llm` section declares, the gateway replaced by the
 * fake, as uid 4242 with a fresh HOME when this runs as root. Codex speaks Responses and runs
 * commands with `exec_command`.
 */
const codex = path.join(projectCliBin(), 'codex');
const haveCodex = existsSync(codex);
const SHELL_TOOL = 'exec_command';

describe('Codex CLI against the fake OpenAI API', () => {
  (haveCodex ? it : it.skip)(
    haveCodex ? 'runs each scripted command through exec_command as the non-root agent and exits 0' : `skipped: the Codex CLI is not installed at ${codex} (npm test's pretest or \`a2rl agents install\` puts it there)`,
    async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'a2rl-codex-cli-'));
      const fake = await startFakeOpenAI({
        script: [
          "mkdir -p code && cat > code/train.py <<'EOF'\nprint('trained', 6 * 7)\nEOF",
          'python3 code/train.py > trained.txt',
          'id -u > whoami.txt && echo "$LLM_MODEL" > model.txt && env > env.txt',
        ],
        finalText: 'Training done and submitted.',
        expectKey: KEY,
      });
      try {
        const { home, workspace, env, model } = prepareRun(root, fake.url);
        const { code, tail } = await runAgent(env, workspace, 120_000);
        expect({ code, tail: code === 0 ? '' : tail }).toEqual({ code: 0, tail: '' });

        expect(readFileSync(path.join(workspace, 'trained.txt'), 'utf8')).toBe('trained 42\n');
        expect(readFileSync(path.join(workspace, 'model.txt'), 'utf8').trim()).toBe(model);
        if (process.getuid?.() === 0) expect(readFileSync(path.join(workspace, 'whoami.txt'), 'utf8').trim()).toBe(String(AGENT_UID));
        // commands get the sandbox's PATH (no login shell) and not the gateway token
        const commandEnv = readFileSync(path.join(workspace, 'env.txt'), 'utf8');
        expect(commandEnv.includes(KEY)).toBe(false);
        expect(commandEnv.split('\n').find((l) => l.startsWith('PATH='))?.includes(projectCliBin())).toBe(true);
        // the CLI keeps its state in the agent home, never in the workspace, and writes no token there
        expect(readdirSync(workspace).sort()).toEqual(['code', 'description.md', 'env.txt', 'instructions.md', 'model.txt', 'trained.txt', 'whoami.txt']);
        expect(filesUnder(path.join(home, '.codex', 'sessions')).length).toBeGreaterThan(0);
        expect(filesUnder(path.join(home, '.codex', 'shell_snapshots'))).toEqual([]);
        expect(filesUnder(home).filter((f) => readFileSync(f).includes(KEY))).toEqual([]);

        expect(fake.calls.every((c) => c.authOk && c.status === 200 && c.path === '/v1/responses' && c.stream && c.model === model)).toBe(true);
        expect(fake.calls.map((c) => c.toolCall?.name ?? null)).toEqual([SHELL_TOOL, SHELL_TOOL, SHELL_TOOL, null]);
        expect(fake.calls.every((c) => c.tools.includes(SHELL_TOOL))).toBe(true);
      } finally {
        await fake.close();
        rmSync(root, { recursive: true, force: true });
      }
    },
    150_000,
  );

  (haveCodex ? it : it.skip)(
    haveCodex ? 'gives up on an upstream that keeps failing after a bounded number of retries, exiting non-zero' : 'skipped: the Codex CLI is not installed',
    async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'a2rl-codex-cli-'));
      const fake = await startFakeOpenAI({ script: ['echo never'], expectKey: KEY, mode: 'error' });
      try {
        const { workspace, env } = prepareRun(root, fake.url);
        const { code } = await runAgent(env, workspace, 120_000);
        expect(code === 0 || code === null).toBe(false);
        expect(fake.calls.length).toBeGreaterThan(1);
        expect(fake.calls.length).toBeLessThanOrEqual(9);
        expect(fake.calls.every((c) => c.status === 500)).toBe(true);
      } finally {
        await fake.close();
        rmSync(root, { recursive: true, force: true });
      }
    },
    150_000,
  );
});

const prepareRun = (root: string, fakeUrl: string) => prepareDirectRun(root, { agent: 'codex-cli', gatewayPrefix: '{gateway}/openai', fakeUrl, token: KEY });
const runAgent = runStartScript;
