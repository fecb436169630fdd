import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import type { Usage } from './protocol.js';

/** USD per million tokens of each kind. */
export interface TokenRates {
  input: number;
  output: number;
  /** Input read from the provider's prompt cache; absent: billed as input. */
  cacheRead?: number;
  /** Input written to the prompt cache (Anthropic's 5-minute write); absent: billed as input. */
  cacheWrite?: number;
}

export interface ModelPrice extends TokenRates {
  /** Glob over the model id (`*` any run of characters, `?` one), case-insensitive; first match wins. */
  match: string;
  /** Rates for a request whose prompt (input + cache read + cache write) exceeds `above` tokens: all its tokens are billed at them. */
  longContext?: TokenRates & { above: number };
}

export interface PriceTable {
  /** Recorded with every call (`LlmCallRecorded.priceTable`): which prices its cost was computed with. */
  version: string;
  currency: 'USD';
  unit: 'per million tokens';
  sources?: Record<string, string>;
  models: ModelPrice[];
}

/** The price table shipped with a2rl: modules/llm-gateway/prices.json (docs/llm-gateway.md says how to update it). */
export function priceTable(): PriceTable {
  shipped ??= loadPriceTable(path.join(packageRoot(), 'modules', 'llm-gateway', 'prices.json'));
  return shipped;
}
let shipped: PriceTable | undefined;

/** Reads and checks a price table file; throws naming the first bad entry. */
export function loadPriceTable(file: string): PriceTable {
  return checkPriceTable(JSON.parse(readFileSync(file, 'utf8')) as unknown);
}

export function checkPriceTable(raw: unknown): PriceTable {
  const table = raw as Partial<PriceTable> | null;
  if (!table || typeof table.version !== 'string' || !table.version) throw new Error('price table: no version');
  if (table.currency !== 'USD' || table.unit !== 'per million tokens') throw new Error('price table: currency must be USD, unit "per million tokens"');
  if (!Array.isArray(table.models)) throw new Error('price table: no models');
  table.models.forEach((entry, i) => checkEntry(entry, `price table: models[${i}]`));
  return table as PriceTable;
}

function checkEntry(entry: ModelPrice, where: string): void {
  if (typeof entry?.match !== 'string' || !entry.match) throw new Error(`${where}: no match pattern`);
  checkRates(entry, `${where} (${entry.match})`);
  if (entry.longContext !== undefined) {
    checkRates(entry.longContext, `${where} (${entry.match}) longContext`);
    if (!(Number.isInteger(entry.longContext.above) && entry.longContext.above > 0)) throw new Error(`${where} (${entry.match}) longContext: above must be a positive integer`);
  }
}

function checkRates(rates: TokenRates, where: string): void {
  const valid = (n: unknown, optional: boolean) => (optional && n === undefined) || (typeof n === 'number' && Number.isFinite(n) && n >= 0);
  if (!valid(rates.input, false) || !valid(rates.output, false) || !valid(rates.cacheRead, true) || !valid(rates.cacheWrite, true)) {
    throw new Error(`${where}: rates must be non-negative numbers`);
  }
}

/** The first entry whose pattern matches the model (a leading `models/`, as Gemini writes it, ignored); null when none does. */
export function priceOf(model: string | null | undefined, table: PriceTable = priceTable()): ModelPrice | null {
  if (!model) return null;
  const id = model.replace(/^models\//, '');
  return table.models.find((entry) => globRegExp(entry.match).test(id)) ?? null;
}

const compiled = new Map<string, RegExp>();
function globRegExp(glob: string): RegExp {
  let re = compiled.get(glob);
  if (!re) {
    const source = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
    re = new RegExp(`^${source}$`, 'i');
    compiled.set(glob, re);
  }
  return re;
}

/**
 * What a call cost in USD: null when the model is not in the table (unknown is not free) or the
 * answer reported no usage. `usage.inputTokens` is the input not read from the cache (the codecs
 * report it so for every provider); missing cache counts are 0.
 */
export function costOf(model: string | null | undefined, usage: Usage, table: PriceTable = priceTable()): number | null {
  const price = priceOf(model, table);
  if (!price || (usage.inputTokens === null && usage.outputTokens === null)) return null;
  const input = usage.inputTokens ?? 0;
  const cacheRead = usage.cacheReadTokens ?? 0;
  const cacheWrite = usage.cacheWriteTokens ?? 0;
  const long = price.longContext;
  const rates = long && input + cacheRead + cacheWrite > long.above ? long : price;
  const micro =
    input * rates.input +
    (usage.outputTokens ?? 0) * rates.output +
    cacheRead * (rates.cacheRead ?? rates.input) +
    cacheWrite * (rates.cacheWrite ?? rates.input);
  return Math.round(micro * 1e4) / 1e10; // per-million rates: dollars = micro / 1e6, kept to 1e-10 $
}

/**
 * The most a call can cost: its model's price, or for a model the table does not price the dearest
 * rates of the table (every kind of token at the highest rate any entry has, long-context ones
 * included), so a limit on cost is not sidestepped with an unpriced model name.
 */
export function worstCostOf(model: string | null | undefined, usage: Usage, table: PriceTable = priceTable()): number {
  const known = costOf(model, usage, table);
  if (known !== null) return known;
  const rates = dearestRates(table);
  const micro = (usage.inputTokens ?? 0) * rates.input + (usage.outputTokens ?? 0) * rates.output + ((usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)) * rates.input;
  return Math.round(micro * 1e4) / 1e10;
}

function dearestRates(table: PriceTable): { input: number; output: number } {
  let input = 0;
  let output = 0;
  for (const entry of table.models) {
    for (const rates of entry.longContext ? [entry, entry.longContext] : [entry]) {
      input = Math.max(input, rates.input, rates.cacheRead ?? 0, rates.cacheWrite ?? 0);
      output = Math.max(output, rates.output);
    }
  }
  return { input, output };
}
