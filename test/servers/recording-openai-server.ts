import http from 'node:http';
import { listenLocal } from './local-http.js';
import { Readable } from 'node:stream';
import { createOpenAiHandler, type ScriptedAnswers } from './fake-vllm.mjs';
import type { EvaluationContext, OpenAiEndpoint } from '../../tasks/task-pack.js';

/** One request the server received: its route and parsed JSON body. */
export interface RecordedRequest {
  route: string;
  body: Record<string, unknown>;
}

export interface RecordingOpenAiServer extends OpenAiEndpoint {
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * The scripted OpenAI-compatible test server (fake-vllm's handler: replies from `answers`, stop strings
 * honoured) that also records every request, so a test can check what a task sends: chat or text
 * completion, max_tokens, stop, temperature and the exact prompt.
 */
export async function startRecordingOpenAiServer(answers: ScriptedAnswers, model = 'a2rl-recorded-model'): Promise<RecordingOpenAiServer> {
  const requests: RecordedRequest[] = [];
  const handler = createOpenAiHandler({ model, answers });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      try {
        requests.push({ route: (req.url ?? '').split('?')[0]!, body: JSON.parse(raw.toString('utf8')) as Record<string, unknown> });
      } catch {
        // not JSON: the handler answers 400
      }
      // Replay the body to the scripted handler, which reads the request stream itself.
      const replay = Object.assign(Readable.from([raw]), { method: req.method, url: req.url, headers: req.headers });
      handler(replay as unknown as http.IncomingMessage, res);
    });
  });
  return { ...(await listenLocal(server)), model, requests };
}

/** An evaluation context whose `serve` answers every checkpoint from `server` (never stopped by the evaluation). */
export function recordingContext(server: RecordingOpenAiServer, judge: OpenAiEndpoint | null = null): EvaluationContext {
  return {
    device: 'cpu',
    judge,
    envServer: () => Promise.reject(new Error('no environment server in this test')),
    serve: async () => ({ baseUrl: server.baseUrl, model: server.model, stop: async () => undefined }),
  };
}
