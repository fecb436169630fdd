import type { InstructionType } from './instructions.js';

/**
 * The hidden judge. For one instruction it compares the model's response with the reference
 * response and returns the probability that the model's is preferred:
 *   logit = 3·Δformat + 3·Δcoverage − 3·Δdefects + 0.8·tanh(Δwords / 15)
 * where Δ is model minus reference, format ∈ [0,1] is compliance with the instruction type, coverage
 * ∈ [0,1] the share of required words present (the topic's content words and any requested
 * keywords), defects counts leftover template braces, empty answers and repeated lines, and the last
 * term is the verbosity bias real LLM judges show (longer answers win more often).
 */
export interface JudgedItem {
  category: InstructionType;
  topic: string;
  keywords: string[];
  n?: number;
}

const STOP_WORDS = new Set(['the', 'a', 'an', 'of', 'and', 'in', 'on']);
const words = (text: string): string[] => text.toLowerCase().match(/[a-z0-9']+/g) ?? [];
const stem = (w: string): string => w.replace(/(es|s)$/, '');
const lines = (text: string): string[] => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');

function formatScore(item: JudgedItem, response: string): number {
  const ls = lines(response);
  switch (item.category) {
    case 'list': {
      const n = item.n ?? 3;
      const items = ls.filter((l) => /^(\d+[.)]|[-*•])\s+\S/.test(l));
      const countFit = items.length === n ? 1 : Math.max(0, 1 - Math.abs(items.length - n) / n);
      return 0.6 * countFit + 0.4 * (items.length > 0 && items.length === ls.length ? 1 : 0);
    }
    case 'haiku': {
      if (ls.length === 0) return 0;
      const shortLines = ls.filter((l) => words(l).length >= 2 && words(l).length <= 8).length / ls.length;
      return 0.6 * (ls.length === 3 ? 1 : 0) + 0.4 * shortLines;
    }
    case 'sentence': {
      if (ls.length !== 1) return 0;
      const sentences = ls[0]!.split(/(?<=[.!?])\s+/).filter((s) => s !== '');
      const single = sentences.length === 1 && /[.!?]$/.test(ls[0]!) ? 1 : 0;
      const sized = words(ls[0]!).length >= 6 && words(ls[0]!).length <= 45 ? 1 : 0;
      return 0.4 + 0.4 * single + 0.2 * sized;
    }
    case 'title': {
      if (ls.length !== 1) return 0;
      const ws = ls[0]!.split(/\s+/);
      const capitalised = ws.filter((w) => /^[A-Z0-9]/.test(w)).length / ws.length;
      return 0.4 + 0.3 * (ws.length >= 2 && ws.length <= 12 ? 1 : 0) + 0.15 * (/[.!?]$/.test(ls[0]!) ? 0 : 1) + 0.15 * (capitalised >= 0.6 ? 1 : 0);
    }
  }
}

function coverage(item: JudgedItem, response: string): number {
  const required = [...words(item.topic).filter((w) => !STOP_WORDS.has(w)), ...item.keywords.flatMap(words)];
  if (required.length === 0) return 1;
  const present = new Set(words(response).map(stem));
  return required.filter((w) => present.has(stem(w))).length / required.length;
}

function defects(response: string): number {
  const ls = lines(response);
  return (response.trim() === '' ? 1 : 0) + (/[{}]|\[\[|\]\]/.test(response) ? 1 : 0) + (new Set(ls).size < ls.length ? 0.5 : 0);
}

export const wordCount = (text: string): number => words(text).length;
const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

/** P(model response preferred over the reference) for one instruction. */
export function preference(item: JudgedItem, model: string, reference: string): number {
  const logit =
    3 * (formatScore(item, model) - formatScore(item, reference)) +
    3 * (coverage(item, model) - coverage(item, reference)) -
    3 * (defects(model) - defects(reference)) +
    0.8 * Math.tanh((wordCount(model) - wordCount(reference)) / 15);
  return sigmoid(logit);
}

/**
 * Length-controlled win rate in the spirit of AlpacaEval 2.0: fit
 *   P(win_i) = sigmoid(θ + φ·tanh(Δlen_i / sd(Δlen)))
 * to the judge's preferences (soft labels, cross-entropy, L2 penalty 0.01 on both parameters,
 * 50 Newton steps from 0: deterministic), then predict with the length term removed: sigmoid(θ).
 * AlpacaEval also models instruction difficulty; with one model and one reference that term is omitted.
 */
export function lengthControlledWinRate(preferences: readonly number[], lengthDiffs: readonly number[]): { lcWinRate: number; lengthCoefficient: number } {
  const count = preferences.length;
  if (count === 0) return { lcWinRate: 0, lengthCoefficient: 0 };
  const mean = lengthDiffs.reduce((a, b) => a + b, 0) / count;
  const sd = Math.sqrt(lengthDiffs.reduce((a, d) => a + (d - mean) ** 2, 0) / count) || 1;
  const x = lengthDiffs.map((d) => Math.tanh(d / sd));
  const lambda = 0.01;
  let theta = 0;
  let phi = 0;
  for (let step = 0; step < 50; step++) {
    let g0 = lambda * theta, g1 = lambda * phi, h00 = lambda, h01 = 0, h11 = lambda;
    for (let i = 0; i < count; i++) {
      const p = sigmoid(theta + phi * x[i]!);
      const r = (p - preferences[i]!) / count;
      const w = (p * (1 - p)) / count;
      g0 += r;
      g1 += r * x[i]!;
      h00 += w;
      h01 += w * x[i]!;
      h11 += w * x[i]! * x[i]!;
    }
    const det = h00 * h11 - h01 * h01;
    theta -= (h11 * g0 - h01 * g1) / det;
    phi -= (h00 * g1 - h01 * g0) / det;
  }
  return { lcWinRate: sigmoid(theta), lengthCoefficient: phi };
}
