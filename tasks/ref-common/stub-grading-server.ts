import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isAbsolute, resolve } from 'node:path';
import { InvalidCheckpointError, type TaskPack } from '../task-pack.js';

/**
 * Test double of the grading API for the reference-agent specs: `POST /g/<token>/submit
 * {model_path}` grades with the pack's evaluator and answers like the real API. Only what the
 * agents use is implemented; path confinement and the ledger are the real API's business.
 */
export interface StubGradingServer {
  url: string;
  submissions: { modelPath: string; score?: number; error?: string }[];
  close(): Promise<void>;
}

export async function startStubGradingServer(
  pack: TaskPack,
  options: { workspace: string; privateDir: string; baselineScore: number },
): Promise<StubGradingServer> {
  const token = 'stub-token';
  const submissions: StubGradingServer['submissions'] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const reply = (status: number, payload: object): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      if (req.method !== 'POST' || req.url !== `/g/${token}/submit`) return reply(404, { error: 'not found' });
      void (async () => {
        const modelPath = String((JSON.parse(body) as { model_path?: unknown }).model_path);
        const path = isAbsolute(modelPath) ? modelPath : resolve(options.workspace, modelPath);
        try {
          const { score } = await pack.evaluate(path, options.privateDir);
          submissions.push({ modelPath, score });
          const best = Math.max(...submissions.flatMap((s) => (s.score === undefined ? [] : [s.score])));
          reply(200, {
            submission_id: submissions.length,
            score,
            baseline_score: options.baselineScore,
            improvement: score - options.baselineScore,
            best,
            total_submissions: submissions.length,
          });
        } catch (error) {
          const message = (error as Error).message;
          submissions.push({ modelPath, error: message });
          reply(error instanceof InvalidCheckpointError ? 400 : 500, { error: message });
        }
      })();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/g/${token}`,
    submissions,
    close: () => new Promise<void>((done, fail) => server.close((e) => (e ? fail(e) : done()))),
  };
}
