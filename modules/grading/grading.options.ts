import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { publishFile } from '../settings/publish-file.js';

/** Injection token: the operator's bearer token for `POST /set_baseline` (never given to an agent). */
export const OPERATOR_TOKEN = Symbol('OPERATOR_TOKEN');
/** Injection token: tunables of the grading API (see GradingOptions). */
export const GRADING_OPTIONS = Symbol('GRADING_OPTIONS');

export interface GradingOptions {
  /** An evaluation running longer is aborted and reported as an evaluator error. */
  evaluatorTimeoutMs: number;
  /** Where submitted checkpoints are copied before grading (the evaluator grades the archived bytes). */
  stagingDir: string;
  /** GPU ids a submission's `gpu` may name; the first is the default device (gpus.ts). Empty: gradings run on 'cpu'. */
  availableGpus: string[];
}

/** GradingModule's default stages under `<A2RL_HOME>/grading-staging` (outside every workspace) instead. */
export const DEFAULT_GRADING_OPTIONS: GradingOptions = {
  evaluatorTimeoutMs: 10 * 60_000,
  stagingDir: os.tmpdir(),
  availableGpus: [],
};

/** Largest JSON body any grading endpoint accepts. */
export const GRADING_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Reads `<home>/operator.token`, creating it (mode 0600, 256 random bits) when absent. Concurrent
 * first starts (a worker and a scheduler sharing a home) agree on one token: the file appears whole
 * or not at all (publishFile), so none reads it empty and none overwrites another's.
 */
export async function loadOrCreateOperatorToken(home: string): Promise<string> {
  const file = path.join(home, 'operator.token');
  await mkdir(home, { recursive: true });
  const existing = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (existing === null) publishFile(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, replace: false });
  const token = (existing ?? (await readFile(file, 'utf8'))).trim();
  if (token.length < 16) throw new Error(`${file} holds no usable operator token (expected at least 16 characters)`);
  return token;
}
