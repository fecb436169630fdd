import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { recordingContext, startRecordingOpenAiServer, type RecordingOpenAiServer } from '../../test/servers/recording-openai-server.js';
import { reactPolicy, PROMPT_KEYS } from '../alfworld/prompt.js';
import { judgeAnswer } from '../deepsearchqa/judge.js';
import { FORCE_REQUEST, runEpisode } from '../deepsearchqa/react.js';
import { gsm8k, gsm8kPrompt } from '../gsm8k/index.js';
import { humaneval, humanEvalPrompt } from '../humaneval/index.js';
import { webshopPolicy } from '../webshop/index.js';
import { loadProtocol } from './protocol.js';
import { generate } from './served-chat.js';

// What the served model sees, recorded by the scripted OpenAI-compatible server: the route (chat vs text
// completion), max_tokens, stop, temperature and the prompt, exactly as each task's protocol.json says.

const here = path.dirname(fileURLToPath(import.meta.url));
const settingsOf = (task: string) => {
  const { maxTokens, stop, temperature } = loadProtocol(task).request;
  return { max_tokens: maxTokens, temperature, ...(stop.length ? { stop } : {}) };
};
const routeOf = (task: string) => (loadProtocol(task).request.api === 'chat' ? '/v1/chat/completions' : '/v1/completions');
const sampling = (body: Record<string, unknown>) => ({ max_tokens: body.max_tokens, temperature: body.temperature, ...(body.stop ? { stop: body.stop } : {}) });

let server: RecordingOpenAiServer;
let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-requests-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));
afterEach(() => server?.close());

describe('requests each paper task sends, as its protocol says', () => {
  it('gsm8k: chat completions with the 4-shot rounds, 512 tokens, greedy, no stop list', async () => {
    server = await startRecordingOpenAiServer({ rules: [], default: 'The answer is 18' });
    const result = await gsm8k.evaluate(path.join(here, '../gsm8k/fixtures/good-model'), path.join(here, '../gsm8k/fixtures'), undefined, recordingContext(server));
    expect(result.details).toMatchObject({ total: 8 });
    expect(server.requests).toHaveLength(8);
    for (const r of server.requests) {
      expect(r.route).toBe(routeOf('gsm8k'));
      expect(sampling(r.body)).toEqual(settingsOf('gsm8k'));
      expect(r.body).toEqual({ model: server.model, messages: expect.any(Array), max_tokens: 512, temperature: 0 });
    }
    const asked = server.requests.map((r) => JSON.stringify(r.body.messages));
    expect(asked).toContain(JSON.stringify(gsm8kPrompt('A tank holds 640 liters. It is drained at 16 liters per minute. How many minutes until it is empty?')));
  });

  it('humaneval: one chat completion per held-out problem, 8192 tokens, greedy', async () => {
    server = await startRecordingOpenAiServer({ rules: [], default: '```python\ndef f():\n    pass\n```' });
    const privateDir = path.join(root, 'humaneval');
    await mkdir(privateDir);
    const problem = { task_id: 'T/0', prompt: 'def f():\n    """Nothing."""\n', canonical_solution: '    pass\n', test: 'def check(c):\n    assert c() is None\n', entry_point: 'f' };
    await writeFile(path.join(privateDir, 'humaneval.jsonl'), `${JSON.stringify(problem)}\n`);
    const checkpoint = path.join(root, 'ckpt');
    await mkdir(checkpoint);
    await writeFile(path.join(checkpoint, 'config.json'), '{}');
    const result = await humaneval.evaluate(checkpoint, privateDir, undefined, recordingContext(server));
    expect(result.score).toBe(100);
    expect(server.requests.map((r) => [r.route, sampling(r.body), r.body.messages])).toEqual([[routeOf('humaneval'), settingsOf('humaneval'), humanEvalPrompt(problem)]]);
  });

  it('alfworld: text completions of the growing ReAct prompt, 100 tokens, stop "\\n"', async () => {
    server = await startRecordingOpenAiServer({ rules: [], default: 'go to fridge 1\nObservation: invented' });
    const prompts = Object.fromEntries(PROMPT_KEYS.map((k) => [k, `example ${k}\n`]));
    const transcript = reactPolicy(prompts).start({ observation: 'You are here.\nYour task is to: cool an egg.', admissibleActions: [], info: { task_type: 'pick_cool_then_place_in_recep-Egg-None-Microwave-5' } });
    const reply = await generate(server, reactPolicy(prompts).request, transcript.input());
    expect(reply).toBe('go to fridge 1');
    const [request] = server.requests;
    expect(request!.route).toBe(routeOf('alfworld'));
    expect(sampling(request!.body)).toEqual(settingsOf('alfworld'));
    expect(request!.body.prompt).toBe((transcript.input() as { prompt: string }).prompt);
    expect(request!.body.messages).toBeUndefined();
  });

  it('webshop: a [system, user] chat per step, 100 tokens, stop "\\n"', async () => {
    server = await startRecordingOpenAiServer({ rules: [], default: 'search[socks]\nmore' });
    const policy = webshopPolicy();
    const transcript = policy.start({ observation: 'WebShop [SEP] Instruction: [SEP] i need socks [SEP] Search', admissibleActions: ['search[<query>]'], info: { instruction: 'i need socks', available: { has_search_bar: true, clickables: ['search'] } } });
    expect(transcript.parseReply(await generate(server, policy.request, transcript.input()))).toEqual({ action: 'search[socks]' });
    const [request] = server.requests;
    expect(request!.route).toBe(routeOf('webshop'));
    expect(sampling(request!.body)).toEqual(settingsOf('webshop'));
    expect((request!.body.messages as { role: string }[]).map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('deepsearchqa: text completions (256 tokens, its three stops), the forced answer (128 tokens, stop "]"), and one judge chat per question', async () => {
    server = await startRecordingOpenAiServer({ rules: [{ tail: true, contains: '\nAction: answer[', reply: 'Paris] done' }], default: 'It is in France.\nAction: answer[Paris]' });
    const search = { name: 'none', search: async () => [] };
    const episode = await runEpisode(server, 'Capital of France?', 'Single Answer', search);
    expect(episode).toMatchObject({ answer: 'Paris', steps: 1, forcedAnswers: 1 });
    const [step, forced] = server.requests;
    expect([step!.route, forced!.route]).toEqual([routeOf('deepsearchqa'), routeOf('deepsearchqa')]);
    expect(sampling(step!.body)).toEqual(settingsOf('deepsearchqa'));
    expect(sampling(forced!.body)).toEqual({ max_tokens: FORCE_REQUEST.maxTokens, temperature: 0, stop: [']'] });
    expect(forced!.body.prompt).toBe(`${step!.body.prompt as string} It is in France.\nAction: answer[`);

    const judge = await startRecordingOpenAiServer({ rules: [], default: 'correct' }, 'judge');
    try {
      expect(await judgeAnswer(judge, { problem: 'Q', problem_category: 'c', answer: 'A, B, C', answer_type: 'Set Answer' }, 'A, B and C')).toEqual({ correct: true, fallback: false });
      expect(judge.requests).toHaveLength(1);
      expect(judge.requests[0]!.route).toBe('/v1/chat/completions');
      expect(sampling(judge.requests[0]!.body)).toEqual({ max_tokens: 16, temperature: 0 });
      expect((judge.requests[0]!.body.messages as { role: string }[]).map((m) => m.role)).toEqual(['system', 'user']);
    } finally {
      await judge.close();
    }
  });
});
