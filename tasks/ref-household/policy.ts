/**
 * The "model" of ref-household: a linear scorer over sparse string features of (what the agent has
 * seen so far, one admissible action). Features depend only on text the agent sees (the goal line,
 * its own actions and their observations), so agents can compute them during training exactly as
 * the evaluator does; data/README.md documents them for agents.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidCheckpointError } from '../task-pack.js';
import { fnv1a } from './prng.js';
import { APPLIANCE, type Goal, type GoalKind, typeOf } from './world.js';

export const CHECKPOINT_FORMAT = 'a2rl-ref/ref-household/1';
const MAX_FILE_BYTES = 4 * 1024 * 1024;
const MAX_FEATURES = 20_000;

export type Weights = Readonly<Record<string, number>>;
export type Phase = 'find' | 'treat' | 'place' | 'wrong';

const GOAL_LINE = /Your task is to: (?:put some (\w+) in (.+?)\.|(clean|heat|cool) some (\w+) and put it in (.+?)\.)\s*$/;

export function parseGoal(observation: string): Goal {
  const m = observation.match(GOAL_LINE);
  if (!m) throw new Error(`no goal line in observation: ${JSON.stringify(observation.slice(0, 200))}`);
  return m[1] !== undefined
    ? { kind: 'pick', object: m[1], target: m[2]! }
    : { kind: m[3] as GoalKind, object: m[4]!, target: m[5]! };
}

/** What the agent knows mid-episode, rebuilt from its own actions and the observations they got. */
export class EpisodeView {
  readonly goal: Goal;
  holding: string | null = null;
  readonly visited = new Set<string>();
  /** Object instances currently carrying the goal's treatment (clean/hot/cool). */
  readonly treated = new Set<string>();
  step = 0;

  constructor(firstObservation: string) {
    this.goal = parseGoal(firstObservation);
  }

  get phase(): Phase {
    if (this.holding === null) return 'find';
    if (typeOf(this.holding) !== this.goal.object) return 'wrong';
    return this.goal.kind !== 'pick' && !this.treated.has(this.holding) ? 'treat' : 'place';
  }

  observe(action: string, observation: string): void {
    this.step++;
    let m: RegExpMatchArray | null;
    if ((m = action.match(/^go to (.+)$/)) && observation.startsWith('You arrive at ')) {
      this.visited.add(m[1]!);
    } else if ((m = action.match(/^take (.+) from .+$/)) && observation.startsWith('You pick up ')) {
      this.holding = m[1]!;
    } else if (action.startsWith('put ') && observation.startsWith('You put ')) {
      this.holding = null;
    } else if ((m = action.match(/^(clean|heat|cool) (.+) with .+$/)) && observation.startsWith(`You ${m[1]} the `)) {
      // Heating undoes cooling and vice versa; cleaning is kept.
      if (m[1] === this.goal.kind) this.treated.add(m[2]!);
      else if (m[1] !== 'clean' && this.goal.kind !== 'clean') this.treated.delete(m[2]!);
    }
  }
}

const OBJECT_ACTION = /^(take|put|clean|heat|cool) (.+?) (?:from|in\/on|with) (.+)$/;

/** The active features of one admissible action in the current view. */
export function actionFeatures(view: EpisodeView, action: string): string[] {
  const phase = view.phase;
  let verb: string;
  let obj: string | null = null;
  let rec: string | null = null;
  let m: RegExpMatchArray | null;
  if ((m = action.match(/^go to (.+)$/))) [verb, rec] = ['go', m[1]!];
  else if ((m = action.match(/^(open|close) (.+)$/))) [verb, rec] = [m[1]!, m[2]!];
  else if ((m = action.match(OBJECT_ACTION))) [verb, obj, rec] = [m[1]!, m[2]!, m[3]!];
  else verb = action.split(' ')[0]!;

  const features = [`${phase}:${verb}`];
  if (obj !== null) features.push(`${phase}:${verb}:obj=${typeOf(obj) === view.goal.object ? 'goal' : 'other'}`);
  if (rec !== null) {
    const appliance = view.goal.kind === 'pick' ? null : APPLIANCE[view.goal.kind];
    const role = rec === view.goal.target ? 'target' : rec === appliance ? 'appliance' : 'other';
    features.push(`${phase}:${verb}:rec=${role}`);
  }
  if (verb === 'go') {
    features.push(`${phase}:go:${view.visited.has(rec!) ? 'visited' : 'new'}`);
    if (phase === 'find') features.push(`find:go:${view.goal.object}@${typeOf(rec!)}`);
  }
  return features;
}

export function scoreAction(weights: Weights, view: EpisodeView, action: string): number {
  let s = 0;
  for (const f of actionFeatures(view, action)) s += weights[f] ?? 0;
  return s;
}

/**
 * Greedy choice: the highest-scoring action; exact ties go to the action with the smallest
 * FNV-1a hash of `<tieKey>|<step>|<action>`, a fixed pseudo-random order that changes every step.
 */
export function greedyAction(weights: Weights, view: EpisodeView, actions: readonly string[], tieKey: string): string {
  let best: string | null = null;
  let bestScore = -Infinity;
  let bestTie = Infinity;
  for (const a of actions) {
    const s = scoreAction(weights, view, a);
    const tie = fnv1a(`${tieKey}|${view.step}|${a}`);
    if (s > bestScore || (s === bestScore && tie < bestTie)) [best, bestScore, bestTie] = [a, s, tie];
  }
  if (best === null) throw new Error('no admissible action to choose from');
  return best;
}

async function readJsonFile(path: string, what: string): Promise<unknown> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    throw new InvalidCheckpointError(`${what} not found in the checkpoint directory`);
  }
  if (size > MAX_FILE_BYTES) throw new InvalidCheckpointError(`${what} is ${size} bytes; at most ${MAX_FILE_BYTES} allowed`);
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (e) {
    throw new InvalidCheckpointError(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Loads and validates a checkpoint's weights; anything unloadable is the agent's fault. */
export async function loadPolicy(checkpointDir: string): Promise<Weights> {
  const manifest = await readJsonFile(join(checkpointDir, 'manifest.json'), 'manifest.json');
  const format = (manifest as { format?: unknown } | null)?.format;
  if (format !== CHECKPOINT_FORMAT) {
    throw new InvalidCheckpointError(`manifest.json format must be "${CHECKPOINT_FORMAT}", got ${JSON.stringify(format)}`);
  }
  const policy = await readJsonFile(join(checkpointDir, 'policy.json'), 'policy.json');
  const weights = (policy as { weights?: unknown } | null)?.weights;
  if (typeof weights !== 'object' || weights === null || Array.isArray(weights)) {
    throw new InvalidCheckpointError('policy.json must be {"weights": {"<feature>": <number>, ...}}');
  }
  const entries = Object.entries(weights);
  if (entries.length > MAX_FEATURES) throw new InvalidCheckpointError(`policy.json has ${entries.length} weights; at most ${MAX_FEATURES} allowed`);
  for (const [k, v] of entries) {
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new InvalidCheckpointError(`policy.json weight ${JSON.stringify(k)} is not a finite number`);
    }
  }
  return Object.fromEntries(entries) as Weights;
}
