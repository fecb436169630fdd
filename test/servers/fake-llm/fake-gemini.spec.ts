import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectCliBin } from '../../../modules/agents/agent-registry.js';
import { AGENT_UID, closeWhileHanging, prepareDirectRun, runStartScript } from './direct-run.js';
import { geminiCodec } from '../../../modules/llm-gateway/protocols/gemini.js';
import { startFakeGemini } from './fake-gemini.js';
import type { FakeLlmServer } from './types.js';

const KEY = 'fake-gateway-token-gemini';
const SHELL_TOOL = 'run_shell_command';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

const shellDeclaration = { name: SHELL_TOOL, parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' }, description: { type: 'string' } }, required: ['command'] } };

describe('fake Gemini API', () => {
  let fake: FakeLlmServer | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('streams the script step as a run_shell_command call, with the usage it was given, in a shape the codec reads', async () => {
    fake = await startFakeGemini({ script: ['echo one', 'echo two'], usage: (n) => ({ input: 10 + n, output: 3 }), model: 'gemini-answered' });
    const request = {
      contents: [
        { role: 'user', parts: [{ text: 'go' }] },
        { role: 'model', parts: [{ functionCall: { name: SHELL_TOOL, args: { command: 'echo one' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: SHELL_TOOL, response: { output: 'one' } } }] },
      ],
      tools: [{ functionDeclarations: [shellDeclaration, { name: 'read_file' }] }],
    };
    const { status, text } = await post(`${fake.url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse`, request, { 'x-goog-api-key': 'anything' });
    expect(status).toBe(200);
    const route = geminiCodec.route('POST', '/v1beta/models/gemini-2.5-pro:streamGenerateContent')!;
    const facts = geminiCodec.responseFacts(route, status, text, true);
    expect(facts.toolCalls).toEqual([{ name: SHELL_TOOL, input: JSON.stringify({ command: 'echo two', description: 'Scripted step 2' }) }]);
    expect(facts.usage).toEqual({ inputTokens: 10, outputTokens: 3, cacheReadTokens: null, cacheWriteTokens: null });
    expect(facts.model).toBe('gemini-answered');
    expect(fake.calls).toEqual([
      {
        path: '/v1beta/models/gemini-2.5-pro:streamGenerateContent',
        url: '/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
        model: 'gemini-2.5-pro',
        stream: true,
        status: 200,
        authOk: true,
        tools: [SHELL_TOOL, 'read_file'],
        toolCall: { name: SHELL_TOOL, command: 'echo two' },
        usage: { input: 10, output: 3 },
        headers: expect.objectContaining({ 'content-type': 'application/json' }),
        finished: true,
        body: expect.objectContaining({ contents: expect.any(Array) }),
      },
    ]);
  });

  it('ends the turn with the final text once the script is done, streamed in pieces', async () => {
    fake = await startFakeGemini({ script: [], finalText: 'All finished.' });
    const { text } = await post(`${fake.url}/v1beta/models/m:streamGenerateContent?alt=sse`, { contents: [{ role: 'user', parts: [{ text: 'go' }] }], tools: [{ functionDeclarations: [shellDeclaration] }] });
    expect(text.split('\n\n').filter((e) => e.startsWith('data:')).length).toBe(2);
    const facts = geminiCodec.responseFacts(geminiCodec.route('POST', '/v1beta/models/m:streamGenerateContent')!, 200, text, true);
    expect([facts.text, facts.stopReason, facts.toolCalls.length]).toEqual(['All finished.', 'STOP', 0]);
    expect(facts.usage.inputTokens).toBe(1000);
    expect(facts.usage.outputTokens).toBe(50);
  });

  it('answers a request for JSON with an object of its schema (next-speaker check), and plain generateContent as JSON', async () => {
    fake = await startFakeGemini({ script: ['echo never'] });
    const schema = { type: 'object', properties: { reasoning: { type: 'string' }, next_speaker: { type: 'string', enum: ['user', 'model'] } }, required: ['reasoning', 'next_speaker'] };
    const { status, text } = await post(`${fake.url}/v1beta/models/gemini-2.5-flash:generateContent`, { contents: [{ role: 'user', parts: [{ text: 'who speaks?' }] }], generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema } });
    expect(status).toBe(200);
    const answer = JSON.parse(text) as { candidates: Array<{ content: { parts: Array<{ text: string }> } }> };
    expect(JSON.parse(answer.candidates[0].content.parts[0].text)).toEqual({ reasoning: '', next_speaker: 'user' });
    expect(fake.calls[0].stream).toBe(false);
  });

  it('counts tokens, lists models and refuses unknown paths in the Gemini error shape', async () => {
    fake = await startFakeGemini({ script: [] });
    const counted = await post(`${fake.url}/v1beta/models/gemini-2.5-pro:countTokens`, { contents: [{ role: 'user', parts: [{ text: 'hello' }] }] });
    expect((JSON.parse(counted.text) as { totalTokens: number }).totalTokens).toBeGreaterThan(0);
    const listing = (await (await fetch(`${fake.url}/v1beta/models`)).json()) as { models: unknown[] };
    expect(listing.models.length).toBeGreaterThan(0);
    const unknown = await post(`${fake.url}/v1beta/files`, {});
    expect([unknown.status, (JSON.parse(unknown.text) as { error: { status: string } }).error.status]).toEqual([404, 'NOT_FOUND']);
  });

  it('checks the key in x-goog-api-key or ?key=, and answers 401 UNAUTHENTICATED to any other', async () => {
    fake = await startFakeGemini({ script: [], expectKey: KEY });
    const body = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
    const byHeader = await post(`${fake.url}/v1beta/models/m:generateContent`, body, { 'x-goog-api-key': KEY });
    const byQuery = await post(`${fake.url}/v1beta/models/m:generateContent?key=${KEY}`, body);
    const wrong = await post(`${fake.url}/v1beta/models/m:generateContent`, body, { 'x-goog-api-key': 'other' });
    expect([byHeader.status, byQuery.status, wrong.status]).toEqual([200, 200, 401]);
    expect((JSON.parse(wrong.text) as { error: { status: string } }).error.status).toBe('UNAUTHENTICATED');
    expect(fake.calls.map((c) => c.authOk)).toEqual([true, true, false]);
  });

  it('answers 500 INTERNAL in error mode and never answers in hang mode (close() ends the request)', async () => {
    fake = await startFakeGemini({ script: ['echo x'], mode: 'error' });
    const failed = await post(`${fake.url}/v1beta/models/m:generateContent`, { contents: [] });
    expect([failed.status, (JSON.parse(failed.text) as { error: { status: string } }).error.status]).toEqual([500, 'INTERNAL']);
    expect(fake.calls[0].usage).toBeUndefined();
    await fake.close();

    fake = await startFakeGemini({ script: ['echo x'], mode: 'hang' });
    const hung = fake;
    fake = undefined;
    expect(await closeWhileHanging(hung, post(`${hung.url}/v1beta/models/m:streamGenerateContent?alt=sse`, { contents: [] }))).toBe('failed');
  });
});

/**
 * The real Gemini CLI (infra/agent-clis, pinned) run the way the harness runs it: start.sh with only
 * the environment and home files agent.json's `llm` section declares, the gateway replaced by the
 * fake, as uid 4242 with a fresh HOME when this runs as root.
 */
const gemini = path.join(projectCliBin(), 'gemini');
const haveGemini = existsSync(gemini);

describe('Gemini CLI against the fake Gemini API', () => {
  (haveGemini ? it : it.skip)(
    haveGemini ? 'runs each scripted command through run_shell_command as the non-root agent and exits 0' : `skipped: the Gemini CLI is not installed at ${gemini} (npm test's pretest or \`a2rl agents install\` puts it there)`,
    async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'a2rl-gemini-cli-'));
      const fake = await startFakeGemini({
        script: [
          "mkdir -p code && cat > code/train.py <<'EOF'\nprint('trained', 6 * 7)\nEOF",
          'python3 code/train.py > trained.txt',
          'id -u > whoami.txt && echo "$LLM_MODEL" > model.txt',
        ],
        finalText: 'Training done and submitted.',
        expectKey: KEY,
      });
      try {
        const { home, workspace, env } = prepareRun(root, fake.url);
        const { code, tail } = await runAgent(env, workspace, 120_000);
        expect({ code, tail: code === 0 ? '' : tail }).toEqual({ code: 0, tail: '' });

        expect(readFileSync(path.join(workspace, 'trained.txt'), 'utf8')).toBe('trained 42\n');
        expect(readFileSync(path.join(workspace, 'model.txt'), 'utf8').trim()).toBe('gemini-2.5-pro');
        if (process.getuid?.() === 0) expect(readFileSync(path.join(workspace, 'whoami.txt'), 'utf8').trim()).toBe(String(AGENT_UID));
        // the CLI keeps its state in the agent home, not in the workspace
        expect(readdirSync(workspace).sort()).toEqual(['code', 'description.md', 'instructions.md', 'model.txt', 'trained.txt', 'whoami.txt']);
        expect(existsSync(path.join(home, '.gemini', 'settings.json'))).toBe(true);

        const modelCalls = fake.calls.filter((c) => c.usage);
        expect(fake.calls.every((c) => c.authOk)).toBe(true);
        expect(modelCalls.map((c) => c.toolCall?.name ?? null)).toEqual([SHELL_TOOL, SHELL_TOOL, SHELL_TOOL, null]);
        expect(modelCalls.every((c) => c.tools.includes(SHELL_TOOL) && c.stream && c.model === 'gemini-2.5-pro')).toBe(true);
        expect(fake.calls.every((c) => c.path.startsWith('/v1beta/models/') && c.status === 200)).toBe(true);
      } finally {
        await fake.close();
        rmSync(root, { recursive: true, force: true });
      }
    },
    150_000,
  );
});

const prepareRun = (root: string, fakeUrl: string) => prepareDirectRun(root, { agent: 'gemini-cli', gatewayPrefix: '{gateway}/gemini', fakeUrl, token: KEY });
const runAgent = runStartScript;
