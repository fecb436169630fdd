import { InvalidCheckpointError } from '../task-pack.js';

/**
 * The ref-arith "model": a cue table. It reads a problem sentence by sentence; the first sentence
 * gives the start quantity, every following sentence up to the question is one step. For a step it
 * finds every cue phrase of the table occurring in the sentence (as a run of whole tokens), keeps the
 * one with the highest confidence (then the longest, then the alphabetically first) and applies its
 * operation with its fixed `arg`, or else with the number in the sentence. A step without any known
 * cue uses the table's `default`. Description.md documents this for the agents.
 */
export type ArithOp = 'add' | 'sub' | 'mul' | 'div';
export const ARITH_OPS: readonly ArithOp[] = ['add', 'sub', 'mul', 'div'];

export interface ArithAction {
  op: ArithOp;
  /** Fixed operand; when absent the step's own number is the operand. */
  arg?: number;
}

export interface Cue extends ArithAction {
  confidence: number;
}

export interface ArithModel {
  cues: ReadonlyMap<string, Cue>;
  fallback: ArithAction;
  /** Longest cue, in tokens: bounds the n-grams looked up per sentence. */
  maxCueTokens: number;
}

/** Lowercase word and number tokens; every number becomes `#` so cues can mention "a number here". */
export function tokenize(sentence: string): string[] {
  return (sentence.toLowerCase().match(/[a-z]+|\d+/g) ?? []).map((t) => (/^\d/.test(t) ? '#' : t));
}

function parseAction(value: unknown, where: string): ArithAction {
  if (typeof value !== 'object' || value === null) throw new InvalidCheckpointError(`${where} must be an object`);
  const { op, arg } = value as Record<string, unknown>;
  if (!ARITH_OPS.includes(op as ArithOp)) {
    throw new InvalidCheckpointError(`${where}.op must be one of ${ARITH_OPS.join(', ')} (got ${JSON.stringify(op)})`);
  }
  if (arg !== undefined && (typeof arg !== 'number' || !Number.isFinite(arg))) {
    throw new InvalidCheckpointError(`${where}.arg must be a finite number when present (got ${JSON.stringify(arg)})`);
  }
  return arg === undefined ? { op: op as ArithOp } : { op: op as ArithOp, arg };
}

/** Validates parsed `weights.json` into a model; every defect is an InvalidCheckpointError naming the field. */
export function loadArithModel(weights: Record<string, unknown>): ArithModel {
  const rawCues = weights['cues'];
  if (typeof rawCues !== 'object' || rawCues === null || Array.isArray(rawCues)) {
    throw new InvalidCheckpointError('weights.json needs "cues": an object mapping cue phrases to {op, arg?, confidence}');
  }
  const cues = new Map<string, Cue>();
  let maxCueTokens = 0;
  for (const [phrase, raw] of Object.entries(rawCues)) {
    const where = `weights.json cues[${JSON.stringify(phrase)}]`;
    const tokens = tokenize(phrase);
    if (tokens.length === 0) throw new InvalidCheckpointError(`${where}: the phrase has no word or number tokens`);
    const action = parseAction(raw, where);
    const confidence = (raw as Record<string, unknown>)['confidence'];
    if (typeof confidence !== 'number' || !Number.isFinite(confidence)) {
      throw new InvalidCheckpointError(`${where}.confidence must be a finite number`);
    }
    cues.set(tokens.join(' '), { ...action, confidence });
    maxCueTokens = Math.max(maxCueTokens, tokens.length);
  }
  if (weights['default'] === undefined) throw new InvalidCheckpointError('weights.json needs "default": {op, arg?} for steps without a known cue');
  return { cues, fallback: parseAction(weights['default'], 'weights.json default'), maxCueTokens };
}

/** The action the model takes for one step sentence. */
export function chooseAction(model: ArithModel, sentence: string): ArithAction {
  const tokens = tokenize(sentence);
  let best: { phrase: string; cue: Cue; length: number } | undefined;
  for (let length = 1; length <= model.maxCueTokens; length++) {
    for (let i = 0; i + length <= tokens.length; i++) {
      const phrase = tokens.slice(i, i + length).join(' ');
      const cue = model.cues.get(phrase);
      if (!cue) continue;
      const better =
        !best ||
        cue.confidence > best.cue.confidence ||
        (cue.confidence === best.cue.confidence && (length > best.length || (length === best.length && phrase < best.phrase)));
      if (better) best = { phrase, cue, length };
    }
  }
  return best ? best.cue : model.fallback;
}

/** The model's answer to a problem, or null when it cannot produce a number. */
export function solve(model: ArithModel, question: string): number | null {
  const sentences = question.trim().split(/(?<=[.?!])\s+/);
  const start = sentences[0]?.match(/\d+/);
  if (!start) return null;
  let value = Number(start[0]);
  for (const sentence of sentences.slice(1)) {
    if (sentence.endsWith('?')) break;
    const action = chooseAction(model, sentence);
    const number = sentence.match(/\d+/);
    const operand = action.arg ?? (number ? Number(number[0]) : undefined);
    if (operand === undefined) continue;
    switch (action.op) {
      case 'add': value += operand; break;
      case 'sub': value -= operand; break;
      case 'mul': value *= operand; break;
      case 'div': if (operand === 0) return null; value /= operand; break;
    }
  }
  return value;
}
