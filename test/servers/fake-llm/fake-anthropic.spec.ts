import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { projectCliBin } from '../../../modules/agents/agent-registry.js';
import { AGENT_UID, closeWhileHanging, filesUnder, prepareDirectRun, runStartScript } from './direct-run.js';
import { anthropicCodec } from '../../../modules/llm-gateway/protocols/anthropic.js';
import { startFakeAnthropic } from './fake-anthropic.js';
import type { FakeLlmServer } from './types.js';

const KEY = 'fake-gateway-token-anthropic-claude';

const bashTool = {
  name: 'Bash',
  input_schema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'] },
};
const readTool = { name: 'Read', input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] } };

async function post(url: string, body: unknown, headers: Record<string, string> = { 'x-api-key': KEY }): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

/** A conversation after `n` tool calls of the script, each answered. */
function afterSteps(n: number): unknown[] {
  const messages: unknown[] = [{ role: 'user', content: [{ type: 'text', text: '<system-reminder>ctx</system-reminder>' }, { type: 'text', text: 'Do the task.' }] }];
  for (let i = 0; i < n; i++) {
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'Bash', input: { command: 'x' } }] });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i}`, content: 'ok', is_error: false }] });
  }
  return messages;
}

describe('fake Anthropic Messages API', () => {
  let fake: FakeLlmServer | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('answers step n of the script with a Bash tool_use, then the final text, as JSON', async () => {
    fake = await startFakeAnthropic({ script: ['ls -la', 'cat a.txt'], finalText: 'Finished.' });
    const tools = [readTool, bashTool];
    type Answer = { content: Array<{ type: string; name?: string; input?: { command: string } }>; stop_reason: string; usage: { input_tokens: number } };
    const answers: Answer[] = [];
    for (const n of [0, 1, 2]) {
      const res = await post(`${fake.url}/v1/messages?beta=true`, { model: 'claude-sonnet-4-6', max_tokens: 1024, tools, messages: afterSteps(n) });
      answers.push(JSON.parse(res.text) as Answer);
    }
    const toolUse = (a: Answer) => a.content.find((b) => b.type === 'tool_use');
    expect(answers.map((a) => [a.stop_reason, toolUse(a)?.name ?? null, toolUse(a)?.input?.command ?? null])).toEqual([
      ['tool_use', 'Bash', 'ls -la'],
      ['tool_use', 'Bash', 'cat a.txt'],
      ['end_turn', null, null],
    ]);
    expect(answers[2].content).toEqual([{ type: 'text', text: 'Finished.' }]);
    expect(answers.map((a) => a.usage.input_tokens)).toEqual([1000, 1100, 1200]);
    expect(fake.calls.map((c) => [c.path, c.status, c.stream, c.toolCall?.command ?? null])).toEqual([
      ['/v1/messages', 200, false, 'ls -la'],
      ['/v1/messages', 200, false, 'cat a.txt'],
      ['/v1/messages', 200, false, null],
    ]);
    expect(fake.calls[0].tools).toEqual(['Read', 'Bash']);
  });

  it('streams the events Anthropic sends, the tool input in input_json_delta fragments', async () => {
    fake = await startFakeAnthropic({ script: ['python3 code/train.py'], model: 'claude-answered', usage: () => ({ input: 321, output: 12 }) });
    const res = await post(`${fake.url}/v1/messages`, { model: 'claude-sonnet-4-6', max_tokens: 1024, stream: true, tools: [bashTool], messages: afterSteps(0) });
    const events = res.text.split('\n\n').filter(Boolean).map((e) => /^event: (\S+)/.exec(e)?.[1]);
    expect(events).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const facts = anthropicCodec.responseFacts({ api: 'messages', billable: true }, res.status, res.text, true);
    expect(facts.model).toBe('claude-answered');
    expect(facts.usage).toEqual({ inputTokens: 321, outputTokens: 12, cacheReadTokens: 0, cacheWriteTokens: 0 });
    expect(facts.stopReason).toBe('tool_use');
    expect(facts.toolCalls.map((t) => [t.name, (JSON.parse(t.input) as { command: string }).command])).toEqual([['Bash', 'python3 code/train.py']]);
    expect(fake.calls[0]).toMatchObject({ stream: true, model: 'claude-sonnet-4-6', usage: { input: 321, output: 12 }, toolCall: { name: 'Bash', command: 'python3 code/train.py' } });
  });

  it('gives requests without tools a short text, and uses a tool that needs a command when there is no Bash', async () => {
    fake = await startFakeAnthropic({ script: ['echo hi'] });
    const plain = await post(`${fake.url}/v1/messages`, { model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'Title?' }] });
    expect((JSON.parse(plain.text) as { content: unknown[] }).content).toEqual([{ type: 'text', text: 'OK.' }]);
    const shell = { name: 'run_shell', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } };
    await post(`${fake.url}/v1/messages`, { model: 'm', max_tokens: 64, tools: [readTool, shell], messages: afterSteps(0) });
    expect(fake.calls.map((c) => c.toolCall?.name ?? null)).toEqual([null, 'run_shell']);
  });

  it('counts tokens, lists models, refuses unknown paths (404) and other keys (401), bearer tokens too', async () => {
    fake = await startFakeAnthropic({ script: [], expectKey: KEY, model: 'claude-listed' });
    const counted = await post(`${fake.url}/v1/messages/count_tokens?beta=true`, { model: 'claude-sonnet-4-6', messages: afterSteps(0) });
    expect((JSON.parse(counted.text) as { input_tokens: number }).input_tokens).toBeGreaterThan(0);
    const models = await fetch(`${fake.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(((await models.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(['claude-listed']);
    const unknown = await post(`${fake.url}/v1/complete`, {});
    const wrong = await post(`${fake.url}/v1/messages`, { model: 'm', messages: [] }, { 'x-api-key': 'sk-other' });
    expect([counted.status, models.status, unknown.status, wrong.status]).toEqual([200, 200, 404, 401]);
    expect(JSON.parse(wrong.text)).toEqual({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    expect(fake.calls.map((c) => [c.path, c.status, c.authOk, c.usage ?? null])).toEqual([
      ['/v1/messages/count_tokens', 200, true, null],
      ['/v1/models', 200, true, null],
      ['/v1/complete', 404, true, null],
      ['/v1/messages', 401, false, null],
    ]);
  });

  it('answers 500 api_error in error mode and never answers in hang mode (close() ends the request)', async () => {
    fake = await startFakeAnthropic({ script: ['echo x'], mode: 'error' });
    const failed = await post(`${fake.url}/v1/messages`, { model: 'm', max_tokens: 8, stream: true, messages: afterSteps(0) });
    expect([failed.status, (JSON.parse(failed.text) as { error: { type: string } }).error.type]).toEqual([500, 'api_error']);
    expect([fake.calls[0].usage, fake.calls[0].stream]).toEqual([undefined, true]);
    await fake.close();

    fake = await startFakeAnthropic({ script: ['echo x'], mode: 'hang' });
    const hung = fake;
    fake = undefined;
    expect(await closeWhileHanging(hung, post(`${hung.url}/v1/messages`, { model: 'm', stream: true, messages: [] }))).toBe('failed');
  });
});

/**
 * The real Claude Code CLI (infra/agent-clis, pinned; a native binary) run the way the harness runs
 * it: start.sh with only the environment agent.json's `llm` section declares, `{gateway}/anthropic`
 * replaced by the fake, as uid 4242 with a fresh HOME when this runs as root. Claude Code runs
 * commands with its `Bash` tool and streams every answer.
 */
const claude = path.join(projectCliBin(), 'claude');
const haveClaude = existsSync(claude);
const SHELL_TOOL = 'Bash';

(haveClaude ? describe : describe.skip)(
  haveClaude ? 'Claude Code against the fake Anthropic API' : `Claude Code against the fake Anthropic API (skipped: no CLI at ${claude}; npm test's pretest or \`a2rl agents install\` puts it there)`,
  () => {
    it('runs each scripted command through Bash as the non-root agent and exits 0 on its own', async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'a2rl-claude-cli-'));
      const fake = await startFakeAnthropic({
        script: ['mkdir -p out && echo hi > out/x.txt', 'cat out/x.txt', 'id -u > whoami.txt && echo "$LLM_MODEL" > model.txt'],
        finalText: 'All done.',
        expectKey: KEY,
      });
      try {
        const { home, workspace, env, model } = prepareRun(root, fake.url);
        const { code, tail } = await runAgent(env, workspace, 120_000);
        expect({ code, tail: code === 0 ? '' : tail.slice(-2000) }).toEqual({ code: 0, tail: '' });
        // stream-json ends with the session's result line
        expect(tail.includes('"subtype":"success"')).toBe(true);

        expect(readFileSync(path.join(workspace, 'out', 'x.txt'), 'utf8')).toBe('hi\n');
        expect(readFileSync(path.join(workspace, 'model.txt'), 'utf8').trim()).toBe(model);
        if (process.getuid?.() === 0) expect(readFileSync(path.join(workspace, 'whoami.txt'), 'utf8').trim()).toBe(String(AGENT_UID));
        // the CLI keeps its state (session transcript, .claude.json) in the agent home, not the workspace, without the token
        expect(readdirSync(workspace).sort()).toEqual(['description.md', 'instructions.md', 'model.txt', 'out', 'whoami.txt']);
        expect(filesUnder(path.join(home, '.claude', 'projects')).some((f) => f.endsWith('.jsonl'))).toBe(true);
        expect(filesUnder(home).filter((f) => readFileSync(f).includes(KEY))).toEqual([]);

        // only the model calls: no reachability probe, telemetry or side requests
        expect(fake.calls.every((c) => c.authOk && c.status === 200 && c.path === '/v1/messages' && c.stream && c.model === model)).toBe(true);
        expect(fake.calls.map((c) => c.toolCall?.name ?? null)).toEqual([SHELL_TOOL, SHELL_TOOL, SHELL_TOOL, null]);
        expect(fake.calls.every((c) => c.tools.includes(SHELL_TOOL))).toBe(true);
      } finally {
        await fake.close();
        rmSync(root, { recursive: true, force: true });
      }
    }, 150_000);

    it('gives up on an upstream that keeps failing after CLAUDE_CODE_MAX_RETRIES retries, exiting non-zero', async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'a2rl-claude-cli-'));
      const fake = await startFakeAnthropic({ script: ['echo never'], expectKey: KEY, mode: 'error' });
      try {
        const { workspace, env } = prepareRun(root, fake.url);
        const { code } = await runAgent(env, workspace, 120_000);
        expect(code === 0 || code === null).toBe(false);
        expect(fake.calls.length).toBe(1 + Number(env.CLAUDE_CODE_MAX_RETRIES));
        expect(fake.calls.every((c) => c.status === 500 && c.authOk)).toBe(true);
      } finally {
        await fake.close();
        rmSync(root, { recursive: true, force: true });
      }
    }, 150_000);
  },
);

const prepareRun = (root: string, fakeUrl: string) => prepareDirectRun(root, { agent: 'claude-code', gatewayPrefix: '{gateway}/anthropic', fakeUrl, token: KEY });
const runAgent = runStartScript;
