// Test fixtures for the grading API specs: a fake task pack, a tiny environment, a workspace on
// disk and a Nest app listening on an ephemeral port. No jest imports, so tsc builds it as-is.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { request } from 'node:http';
import { Test } from '@nestjs/testing';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FsArtifactStore } from '../../../infra/artifacts/fs-artifact-store.js';
import { A2RL_CONFIG, ConfigModule } from '../../../src/config/config.module.js';
import { loadConfig } from '../../../src/config/config.js';
import {
  EvaluatorError,
  InvalidCheckpointError,
  type EnvSession,
  type EvaluationContext,
  type EvaluationResult,
  type InteractiveEnvironment,
  type TaskPack,
  type TrainingEnvironment,
} from '../../../tasks/task-pack.js';
import type { ArtifactStore } from '../../artifacts/artifact-store.port.js';
import type { EventData, EventType } from '../../ledger/events/catalog.js';
import { eventId } from '../../ledger/events/ids.js';
import type { RunContext } from '../../run-context/run-context.js';
import type { WorkspaceLayout } from '../../workspace-fs/layout.js';
import { configureGradingHttp } from '../grading-http.js';
import { GradingModule } from '../grading.module.js';
import { GRADING_OPTIONS, type GradingOptions, OPERATOR_TOKEN } from '../grading.options.js';
import { GradingSockets } from '../grading-sockets.js';
import { type ActiveRun, type RegisterOptions, RunRegistry } from '../run-registry.js';

export const OPERATOR = `op-${'x'.repeat(40)}`;

/**
 * Evaluates `weights.json` of a checkpoint: `{score}` is the score; `{fail: "evaluator"}` throws
 * EvaluatorError; `{hang: true}` never finishes (until aborted); `{delayMs}` slows it down.
 * Anything unreadable is an InvalidCheckpointError. Counts calls and the peak concurrency, and
 * notes the device of each grading.
 */
export class FakeTask implements TaskPack {
  readonly id = 'fake-task';
  readonly level = 1 as const;
  readonly title = 'Fake task';
  readonly baseModel = 'base';
  readonly evaluatorVersion = 'fake-1';
  readonly description = 'A fake task for tests.';
  calls = 0;
  active = 0;
  maxActive = 0;
  readonly devices: string[] = [];

  constructor(readonly environment?: InteractiveEnvironment) {}

  async materialize(): Promise<void> {}

  async evaluate(checkpointDir: string, _privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
    this.calls++;
    if (ctx) this.devices.push(ctx.device);
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      let weights: { score?: unknown; fail?: string; hang?: boolean; delayMs?: number };
      try {
        weights = JSON.parse(await readFile(path.join(checkpointDir, 'weights.json'), 'utf8'));
      } catch (err) {
        throw new InvalidCheckpointError(`weights.json is missing or not JSON (${(err as Error).message})`);
      }
      if (weights.fail === 'evaluator') throw new EvaluatorError('the fake evaluator crashed');
      if (weights.hang) await new Promise((resolve) => signal?.addEventListener('abort', resolve));
      if (weights.delayMs) await new Promise((resolve) => setTimeout(resolve, weights.delayMs));
      if (typeof weights.score !== 'number') throw new InvalidCheckpointError('weights.json has no numeric score');
      return { score: weights.score, details: { graded: 'fake' } };
    } finally {
      this.active--;
    }
  }
}

/** Corridor: "right" wins (reward 1, info.success); "left" does nothing; 3 steps at most. */
export class FakeEnvironment implements InteractiveEnvironment {
  readonly name = 'fake-corridor';
  readonly maxSteps = 3;

  open(): TrainingEnvironment | Promise<TrainingEnvironment> {
    return { createSession: (seed) => this.createSession(seed) };
  }

  createSession(seed: number): EnvSession {
    let steps = 0;
    return {
      reset: () => ({ observation: `room ${seed}`, admissibleActions: ['left', 'right'], info: { seed } }),
      step: (action: string) => {
        steps++;
        const won = action === 'right';
        const done = won || steps >= this.maxSteps;
        return { observation: won ? 'you win' : 'nothing happens', reward: won ? 1 : 0, done, admissibleActions: done ? [] : ['left', 'right'], info: { success: won } };
      },
    };
  }
}

export interface RecordedEvent {
  type: EventType;
  data: EventData<EventType>;
}

export interface TestRun {
  run: ActiveRun;
  ctx: RunContext;
  events: RecordedEvent[];
  ws: WorkspaceLayout;
  task: FakeTask;
  /** `http://127.0.0.1:<port>/g/<token>` */
  url: string;
  /** Writes `output/<name>/weights.json` (plus extra files) and returns the workspace-relative path. */
  checkpoint(name: string, weights: unknown, extra?: Record<string, string>): Promise<string>;
}

export interface TestServer {
  base: string;
  registry: RunRegistry;
  /** Per-run Unix sockets onto this server (what the sandbox bridges in). */
  sockets: GradingSockets;
  artifacts: ArtifactStore;
  home: string;
  newRun(opts?: { task?: FakeTask; gpus?: string[]; baselineScore?: number; deadline?: Date; budgetSeconds?: number; onSubmitted?(): void; runMeta?: RegisterOptions['runMeta'] }): Promise<TestRun>;
  close(): Promise<void>;
}

/** Options override the test defaults; `availableGpus` defaults to none (every grading on 'cpu'). */
export async function startGradingServer(options: Partial<GradingOptions> = {}): Promise<TestServer> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'a2rl-grading-'));
  const artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
  const config = loadConfig({ A2RL_HOME: home });
  const moduleRef = await Test.createTestingModule({ imports: [ConfigModule, GradingModule] })
    .overrideProvider(A2RL_CONFIG)
    .useValue(config)
    .overrideProvider(OPERATOR_TOKEN)
    .useValue(OPERATOR)
    .overrideProvider(GRADING_OPTIONS)
    .useValue({ evaluatorTimeoutMs: 10_000, stagingDir: path.join(home, 'staging'), availableGpus: [], ...options })
    .compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>({ logger: false });
  configureGradingHttp(app);
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;
  const registry = app.get(RunRegistry);
  let runs = 0;

  return {
    base,
    registry,
    sockets: app.get(GradingSockets),
    artifacts,
    home,
    async newRun(opts = {}) {
      const runId = `run-${++runs}`;
      const root = path.join(home, 'workspaces', runId);
      const ws: WorkspaceLayout = {
        root,
        codeDir: path.join(root, 'code'),
        dataDir: path.join(root, 'data'),
        modelsDir: path.join(root, 'models'),
        baseModelDir: path.join(root, 'models', 'base'),
        outputDir: path.join(root, 'output'),
        descriptionFile: path.join(root, 'description.md'),
        instructionsFile: path.join(root, 'instructions.md'),
        runMetaFile: path.join(root, 'run_meta.json'),
      };
      const privateDir = path.join(home, 'private', runId);
      for (const dir of [ws.codeDir, ws.dataDir, ws.baseModelDir, ws.outputDir, privateDir]) await mkdir(dir, { recursive: true });
      await writeFile(path.join(ws.baseModelDir, 'weights.json'), JSON.stringify({ score: 20 }));
      await writeFile(path.join(ws.dataDir, 'train.jsonl'), '{"q":"1+1","a":"2"}\n');
      await writeFile(path.join(privateDir, 'weights.json'), JSON.stringify({ score: 100 }));
      await writeFile(ws.descriptionFile, '# fake\n');
      const task = opts.task ?? new FakeTask();
      const events: RecordedEvent[] = [];
      const token = randomBytes(24).toString('hex');
      const budgetSeconds = opts.budgetSeconds ?? 3600;
      const ctx: RunContext = {
        runId,
        task,
        workspace: ws,
        privateDir,
        token,
        budgetSeconds,
        artifacts,
        ...(opts.gpus ? { gpus: opts.gpus } : {}),
        // Resolves like a run's recorder, with the stored event's id and seq (what a cause names).
        record: async (type, data) => {
          const seq = events.push({ type, data: data as EventData<EventType> }) - 1;
          return { id: eventId(runId, seq), seq };
        },
      };
      const registerOpts: RegisterOptions = {
        deadline: opts.deadline ?? new Date(Date.now() + budgetSeconds * 1000),
        baselineScore: opts.baselineScore ?? 20,
        onSubmitted: opts.onSubmitted,
        runMeta: opts.runMeta,
      };
      const run = registry.register(ctx, registerOpts);
      return {
        run,
        ctx,
        events,
        ws,
        task,
        url: `${base}/g/${token}`,
        async checkpoint(name, weights, extra = {}) {
          const dir = path.join(ws.outputDir, name);
          await mkdir(dir, { recursive: true });
          await writeFile(path.join(dir, 'weights.json'), typeof weights === 'string' ? weights : JSON.stringify(weights));
          for (const [file, content] of Object.entries(extra)) {
            await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
            await writeFile(path.join(dir, file), content);
          }
          return `output/${name}`;
        },
      };
    },
    async close() {
      await app.close();
      await rm(home, { recursive: true, force: true });
    },
  };
}

/** POSTs JSON (or a raw string body) and returns status plus parsed JSON (or text). */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await parse(res) };
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { headers });
  return { status: res.status, body: await parse(res) };
}

async function parse(res: Response): Promise<any> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Any method with any body (fetch refuses a body on GET): status and parsed JSON body. */
export function rawRequest(method: string, url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // keep the text
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
