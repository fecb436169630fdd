import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAiHandler, loadAnswers, type ScriptedAnswers } from './fake-vllm.mjs';
import type { EvaluationContext, OpenAiEndpoint } from '../../tasks/task-pack.js';

export type { ScriptedAnswers };

export interface OpenAiTestServer {
  /** Ends before `/v1`, like OpenAiEndpoint.baseUrl. */
  baseUrl: string;
  model: string;
  close(): Promise<void>;
}

/**
 * An in-process, deterministic OpenAI-compatible server (`/v1/models`, `/v1/chat/completions`,
 * `/v1/completions`). Replies come from `answers`, or from `<checkpointDir>/answers.json` so a test
 * checkpoint can be made "good" or "bad". Same behaviour as fake-vllm.mjs's normal mode.
 */
export async function startOpenAiTestServer(options: { checkpointDir?: string; answers?: ScriptedAnswers; port?: number; model?: string }): Promise<OpenAiTestServer> {
  const answers = options.answers ?? (options.checkpointDir ? loadAnswers(options.checkpointDir) : undefined);
  if (!answers) throw new Error('startOpenAiTestServer needs answers or a checkpointDir holding answers.json');
  const model = options.model ?? 'a2rl-test-model';
  const server = http.createServer(createOpenAiHandler({ model, answers }));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    model,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

/**
 * The evaluation context task specs lend evaluators: `serve` starts an in-process test server answering
 * from the checkpoint's answers.json; the checkpoints served and stopped are appended to `log`. No
 * environment servers.
 */
export function testEvaluationContext(log: { started?: string[]; stopped: string[] }, judge: OpenAiEndpoint | null = null): EvaluationContext {
  return {
    device: 'cpu',
    judge,
    envServer: () => Promise.reject(new Error('no environment server in this test')),
    async serve(checkpointDir) {
      const server = await startOpenAiTestServer({ checkpointDir });
      log.started?.push(checkpointDir);
      return { baseUrl: server.baseUrl, model: server.model, stop: async () => { log.stopped.push(checkpointDir); await server.close(); } };
    },
  };
}
