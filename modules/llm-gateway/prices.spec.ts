import { describe, expect, it } from '@jest/globals';
import { checkPriceTable, costOf, priceOf, priceTable, type PriceTable } from './prices.js';
import type { Usage } from './protocol.js';

const usage = (input: number | null, output: number | null, cacheRead: number | null = null, cacheWrite: number | null = null): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheWriteTokens: cacheWrite,
});

const rates = (model: string) => {
  const price = priceOf(model);
  return price && [price.input, price.output];
};

describe('price table', () => {
  it('ships a versioned table whose entries are all valid', () => {
    const table = priceTable();
    expect(table.version).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(() => checkPriceTable(table)).not.toThrow();
    expect(table.models.length).toBeGreaterThan(30);
  });

  it('prices the current models of each provider by their ids as the APIs name them', () => {
    expect(rates('claude-sonnet-4-5-20250929')).toEqual([3, 15]);
    expect(rates('claude-sonnet-4-6')).toEqual([3, 15]);
    expect(rates('claude-haiku-4-5')).toEqual([1, 5]);
    expect(rates('claude-opus-4-1-20250805')).toEqual([15, 75]);
    expect(rates('claude-opus-4-20250514')).toEqual([15, 75]);
    expect(rates('claude-opus-4-5-20251101')).toEqual([5, 25]);
    expect(rates('gpt-5')).toEqual([1.25, 10]);
    expect(rates('gpt-5-2025-08-07')).toEqual([1.25, 10]);
    expect(rates('gpt-5-mini')).toEqual([0.25, 2]);
    expect(rates('gpt-5.1-codex-mini')).toEqual([0.25, 2]);
    expect(rates('gpt-4.1-2025-04-14')).toEqual([2, 8]);
    expect(rates('gpt-4o')).toEqual([2.5, 10]);
    expect(rates('o4-mini')).toEqual([1.1, 4.4]);
    expect(rates('gemini-2.5-pro')).toEqual([1.25, 10]);
    expect(rates('models/gemini-2.5-flash-lite')).toEqual([0.1, 0.4]);
    expect(rates('gemini-2.5-flash')).toEqual([0.3, 2.5]);
    expect(rates('gemini-3-pro-preview')).toEqual([2, 12]);
  });

  it('gives an unknown model no price rather than a wrong one', () => {
    for (const model of ['gpt-5.9-unreleased', 'gpt-4o-realtime-preview', 'o3-deep-research', 'claude-opus-5-5', 'llama-3-70b', '']) expect(priceOf(model)).toBeNull();
    expect(costOf('llama-3-70b', usage(1000, 1000))).toBeNull();
    expect(costOf(null, usage(1000, 1000))).toBeNull();
  });

  it('computes cost from input, output and cache tokens; null without usage', () => {
    // Sonnet 4.5: 3 in, 15 out, 0.30 cache read, 3.75 cache write per million
    expect(costOf('claude-sonnet-4-5', usage(100_000, 0))).toBeCloseTo(0.3, 10);
    expect(costOf('claude-sonnet-4-5', usage(1000, 500, 10_000, 2000))).toBeCloseTo((1000 * 3 + 500 * 15 + 10_000 * 0.3 + 2000 * 3.75) / 1e6, 12);
    // No cache-read price (gpt-5-pro): cache reads cost as input; no cache-write price (OpenAI): as input.
    expect(costOf('gpt-5-pro', usage(0, 0, 1000, 1000))).toBeCloseTo((2000 * 15) / 1e6, 12);
    expect(costOf('claude-sonnet-4-5', usage(null, null))).toBeNull();
    expect(costOf('claude-sonnet-4-5', usage(10, null))).toBeCloseTo(30 / 1e6, 12);
  });

  it('bills a whole request at the long-context rates once its prompt passes the threshold', () => {
    // Gemini 2.5 Pro: 1.25 / 10 up to 200k prompt tokens, 2.50 / 15 above, cache reads counted in the prompt
    expect(costOf('gemini-2.5-pro', usage(200_000, 1000))).toBeCloseTo((200_000 * 1.25 + 1000 * 10) / 1e6, 10);
    expect(costOf('gemini-2.5-pro', usage(150_000, 1000, 60_000))).toBeCloseTo((150_000 * 2.5 + 1000 * 15 + 60_000 * 0.25) / 1e6, 10);
    expect(costOf('claude-sonnet-4-6', usage(300_000, 0))).toBeCloseTo(0.9, 10); // flat 1M context
  });

  it('takes the first matching entry and matches globs whole, case-insensitively', () => {
    const table: PriceTable = {
      version: 'test',
      currency: 'USD',
      unit: 'per million tokens',
      models: [
        { match: 'a-mini*', input: 1, output: 1 },
        { match: 'a*', input: 2, output: 2 },
        { match: 'b?c', input: 3, output: 3 },
        { match: 'x.y', input: 4, output: 4 },
      ],
    };
    expect(priceOf('a-mini-2', table)?.input).toBe(1);
    expect(priceOf('A-MAX', table)?.input).toBe(2);
    expect(priceOf('bxc', table)?.input).toBe(3);
    expect(priceOf('bxxc', table)).toBeNull();
    expect(priceOf('xzy', table)).toBeNull(); // `.` is literal
    expect(priceOf('za', table)).toBeNull();
  });

  it('rejects a malformed table', () => {
    const base = { version: 'v', currency: 'USD', unit: 'per million tokens' };
    expect(() => checkPriceTable({ ...base, version: '', models: [] })).toThrow(/version/);
    expect(() => checkPriceTable({ ...base, models: [{ match: 'm', input: -1, output: 1 }] })).toThrow(/models\[0\]/);
    expect(() => checkPriceTable({ ...base, models: [{ match: 'm', input: 1, output: 1, longContext: { above: 0, input: 1, output: 1 } }] })).toThrow(/above/);
    expect(() => checkPriceTable({ ...base, unit: 'per token', models: [] })).toThrow(/unit/);
  });
});
