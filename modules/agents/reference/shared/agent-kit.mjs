// Helpers shared by the reference agent's per-task strategies: workspace set-up, code revisions,
// training in child processes and submissions to the grading API. Plain Node ESM, no dependencies.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';

const CONFIG_LINE = /^const CONFIG = .*;$/m;

/** Reads the run's environment (see instructions.md); exits with a clear message when something is missing. */
export function runEnv() {
  const names = ['WORKSPACE', 'MODEL_PATH', 'DATA_PATH', 'OUTPUT_DIR', 'GRADING_SERVER_URL'];
  const missing = names.filter((n) => !process.env[n]);
  if (missing.length > 0) {
    console.error(`reference agent: missing environment ${missing.join(', ')}`);
    process.exit(2);
  }
  const env = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  // A resumed run: this agent has no session to continue, so it starts its plan again (the workspace
  // is as it was) and says what the harness told it.
  if (process.env.A2RL_RESUMED === '1') console.log(`[agent] resumed: ${process.env.A2RL_RESUME_NOTE ?? ''}`);
  env.codeDir = join(env.WORKSPACE, 'code');
  mkdirSync(env.codeDir, { recursive: true });
  mkdirSync(env.OUTPUT_DIR, { recursive: true });
  return env;
}

export const log = (message) => console.log(`[agent] ${message}`);

/** Copies a training script of this strategy into code/ and returns its path there. */
export function installScript(env, strategyDir, file) {
  const target = join(env.codeDir, file);
  copyFileSync(join(strategyDir, file), target);
  log(`wrote code/${file}`);
  return target;
}

/** Edits the `const CONFIG = …;` line of a script in code/: the agent's code revision between submissions. */
export function reviseConfig(script, patch, why) {
  const source = readFileSync(script, 'utf8');
  const match = CONFIG_LINE.exec(source);
  if (!match) throw new Error(`${script} has no CONFIG line to revise`);
  const config = { ...JSON.parse(match[0].slice('const CONFIG = '.length, -1)), ...patch };
  writeFileSync(script, source.replace(CONFIG_LINE, `const CONFIG = ${JSON.stringify(config)};`));
  log(`revised ${relative(join(script, '..', '..'), script)}: ${why} ${JSON.stringify(patch)}`);
}

/** Runs `node <script> <args>` as a child process, echoing its output; rejects when it fails. */
export function train(script, args) {
  log(`training: node ${script} ${args.join(' ')}`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const echo = (stream, sink) => {
      let rest = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop();
        for (const line of lines) sink(`  [train] ${line}`);
      });
      stream.on('end', () => rest && sink(`  [train] ${rest}`));
    };
    echo(child.stdout, console.log);
    echo(child.stderr, console.error);
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`training exited with ${signal ?? `code ${code}`}`)),
    );
  });
}

/** POSTs {model_path} to $GRADING_SERVER_URL/submit; returns the parsed answer ({score, …} or {error}). */
export async function submit(env, checkpointDir) {
  const inside = relative(env.WORKSPACE, checkpointDir);
  const modelPath = inside.startsWith('..') || isAbsolute(inside) ? checkpointDir : inside;
  const headers = { 'content-type': 'application/json' };
  if (process.env.A2RL_RUN_TOKEN) headers.authorization = `Bearer ${process.env.A2RL_RUN_TOKEN}`;
  const res = await fetch(`${env.GRADING_SERVER_URL.replace(/\/$/, '')}/submit`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model_path: modelPath }),
  });
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: `HTTP ${res.status}: ${text.slice(0, 200)}` };
  }
  if (!res.ok && body.error === undefined) body.error = `HTTP ${res.status}`;
  log(
    body.error !== undefined
      ? `submitted ${modelPath}: rejected (${body.error})`
      : `submitted ${modelPath}: score ${body.score} (baseline ${body.baseline_score}, best ${bestScore(body)})`,
  );
  return body;
}

/** The best score so far: a2rl's `best_score`, else the paper's `best.score` (or a bare number). */
function bestScore(body) {
  if (body.best_score !== undefined) return body.best_score;
  return typeof body.best === 'object' && body.best !== null ? body.best.score : body.best;
}

/** A failed grading answers score 0 with an error (as the paper's server): that is no score. */
const scoreOf = (answer) => (answer.error === undefined && typeof answer.score === 'number' ? answer.score : null);

/**
 * Runs a plan of (revise → train → submit) rounds. Round 1 trains the script as installed; each later
 * round first edits its CONFIG. A failed round is reported and the plan goes on with the next one;
 * the process exits with 1 when no round got a score.
 */
export async function runPlan(env, script, rounds) {
  const scores = [];
  for (const [i, round] of rounds.entries()) {
    if (i > 0 || round.patch) reviseConfig(script, round.patch ?? {}, round.why);
    else log(`round ${round.name}: ${round.why}`);
    const out = join(env.OUTPUT_DIR, round.name);
    try {
      await train(script, ['--data', env.DATA_PATH, '--base', env.MODEL_PATH, '--out', out]);
      const answer = await submit(env, out);
      scores.push(scoreOf(answer));
    } catch (error) {
      log(`round ${round.name} failed: ${error.message}`);
      scores.push(null);
    }
  }
  log(`done: scores ${scores.map((s) => s ?? 'n/a').join(' → ')}`);
  if (scores.every((s) => s === null)) process.exitCode = 1;
  return scores;
}
