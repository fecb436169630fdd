#!/usr/bin/env node
// A stand-in for `vllm serve` in tests: a deterministic OpenAI-compatible server whose replies come
// from the served checkpoint's answers.json ({"rules": [{"contains", "reply", "last"?}], "default"}): the
// first rule whose `contains` occurs in the prompt wins (with `"last": true`, in the last chat message
// only: how multi-turn episodes are scripted; with `"tail": true`, the prompt must end with it: how growing
// text-completion prompts are scripted). A request's `stop` strings cut the reply as a server would. Plain Node ESM so the serve command
// template can start it without a TypeScript loader; test/servers/openai-test-server.ts reuses the
// request handling in-process.
//
//   node test/servers/fake-vllm.mjs <model_path> --port <port> [--served-model-name <name>]
//        [--mode normal|never-ready|die-after=N|ignore-sigterm] [--child]
//
// never-ready: logs "loading" forever and never listens. die-after=N: exits abruptly after answering
// N generation requests. ignore-sigterm: survives SIGTERM (needs SIGKILL). --child: also starts a
// grandchild process (same argv marker) to prove the whole process group is stopped.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Reads `<dir>/answers.json`; throws with a clear message when missing or malformed. */
export function loadAnswers(checkpointDir) {
  const file = path.join(checkpointDir, 'answers.json');
  const answers = JSON.parse(readFileSync(file, 'utf8'));
  if (!answers || !Array.isArray(answers.rules) || typeof answers.default !== 'string') {
    throw new Error(`${file}: expected {"rules": [{"contains": "...", "reply": "..."}], "default": "..."}`);
  }
  return answers;
}

export function replyFor(answers, prompt, lastMessage = prompt) {
  const matches = (rule) => (rule.tail ? prompt.endsWith(rule.contains) : (rule.last ? lastMessage : prompt).includes(rule.contains));
  return answers.rules.find(matches)?.reply ?? answers.default;
}

/** The reply up to the first of the request's stop strings (which is not included). */
export function cutAtStop(text, stop) {
  const stops = typeof stop === 'string' ? [stop] : Array.isArray(stop) ? stop.filter((s) => typeof s === 'string' && s !== '') : [];
  const at = Math.min(...stops.map((s) => text.indexOf(s)).filter((i) => i >= 0), text.length);
  return text.slice(0, at);
}

const words = (text) => text.split(/\s+/).filter(Boolean).length;

/**
 * The request listener: GET /v1/models, POST /v1/chat/completions, POST /v1/completions.
 * `onGenerated` runs after each generation response is sent.
 */
export function createOpenAiHandler({ model, answers, onGenerated = () => {} }) {
  const send = (res, status, body, done) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body), done);
  };
  return (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const route = (req.url ?? '').split('?')[0];
      if (req.method === 'GET' && route === '/v1/models') {
        return send(res, 200, { object: 'list', data: [{ id: model, object: 'model', owned_by: 'a2rl-test' }] });
      }
      const chat = route === '/v1/chat/completions';
      if (req.method !== 'POST' || (!chat && route !== '/v1/completions')) {
        return send(res, 404, { error: { message: `no route ${req.method} ${route}`, type: 'NotFoundError' } });
      }
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return send(res, 400, { error: { message: 'body is not JSON', type: 'BadRequestError' } });
      }
      if (body.model !== model) {
        return send(res, 404, { error: { message: `The model \`${body.model}\` does not exist.`, type: 'NotFoundError' } });
      }
      const prompt = chat
        ? (Array.isArray(body.messages) ? body.messages : []).map((m) => String(m?.content ?? '')).join('\n')
        : String(Array.isArray(body.prompt) ? body.prompt[0] : (body.prompt ?? ''));
      const last = chat && Array.isArray(body.messages) && body.messages.length ? String(body.messages.at(-1)?.content ?? '') : prompt;
      const text = cutAtStop(replyFor(answers, prompt, last), body.stop);
      const usage = { prompt_tokens: words(prompt), completion_tokens: words(text), total_tokens: words(prompt) + words(text) };
      const choice = chat
        ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }
        : { index: 0, text, finish_reason: 'stop' };
      const id = `${chat ? 'chatcmpl' : 'cmpl'}-test`;
      send(res, 200, { id, object: chat ? 'chat.completion' : 'text_completion', created: 0, model, choices: [choice], usage }, onGenerated);
    });
  };
}

function main(argv) {
  const modelPath = argv[0];
  const option = (name, fallback) => {
    const i = argv.indexOf(name);
    return i > 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
  };
  const port = Number(option('--port', ''));
  const model = option('--served-model-name', modelPath);
  const mode = option('--mode', 'normal');
  if (!modelPath || !Number.isInteger(port)) {
    process.stderr.write('usage: fake-vllm.mjs <model_path> --port <port> [--served-model-name N] [--mode M] [--child]\n');
    process.exit(2);
  }
  if (argv.includes('--child')) {
    spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', modelPath], { stdio: 'ignore' });
  }
  if (mode === 'ignore-sigterm') process.on('SIGTERM', () => process.stderr.write('fake-vllm: ignoring SIGTERM\n'));
  if (mode === 'never-ready') {
    process.stderr.write(`fake-vllm: loading weights from ${modelPath} (forever)\n`);
    setInterval(() => {}, 1000);
    return;
  }
  let answers;
  try {
    answers = loadAnswers(modelPath);
  } catch (err) {
    process.stderr.write(`fake-vllm: cannot load the model: ${err.message}\n`);
    process.exit(1);
  }
  const dieAfter = /^die-after=(\d+)$/.exec(mode);
  let generated = 0;
  const onGenerated = () => {
    generated += 1;
    if (dieAfter && generated >= Number(dieAfter[1])) {
      process.stderr.write(`fake-vllm: crashing after ${generated} requests\n`);
      process.exit(3);
    }
  };
  http.createServer(createOpenAiHandler({ model, answers, onGenerated })).listen(port, '127.0.0.1', () => {
    process.stderr.write(`fake-vllm: serving ${model} on 127.0.0.1:${port}\n`);
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main(process.argv.slice(2));
