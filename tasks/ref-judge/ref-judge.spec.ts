import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { describeReferencePack } from '../ref-common/reference-pack-suite.js';
import { refJudge } from './index.js';
import { KEYWORDS, TOPICS } from './instructions.js';
import { lengthControlledWinRate, preference } from './judge.js';
import { loadJudgeModel, respond } from './model.js';

const manifest = '{"format":"a2rl-ref/ref-judge/1"}';

describe('ref-judge task pack', () => {
  describeReferencePack({
    pack: refJudge,
    agentDir: fileURLToPath(new URL('../../modules/agents/reference/ref-judge/', import.meta.url)),
    baseScoreRange: [5, 30],
    heldoutOnlyWords: [...TOPICS.heldout, ...KEYWORDS.heldout],
    itemKey: 'instruction',
    agentSubmissions: ['sft-1', 'sft-2', 'sft-3'],
    invalidCheckpoints: [
      ['no manifest', { 'weights.json': '{}' }, /no manifest\.json/],
      ['garbage manifest', { 'manifest.json': '\u0000 nope', 'weights.json': '{}' }, /manifest\.json is not valid JSON/],
      ['wrong format', { 'manifest.json': '{"format":"a2rl-ref/ref-arith/1"}', 'weights.json': '{}' }, /this task loads "a2rl-ref\/ref-judge\/1"/],
      ['no weights', { 'manifest.json': manifest }, /no weights\.json/],
      ['weights not an object', { 'manifest.json': manifest, 'weights.json': '[1,2]' }, /weights\.json must hold a JSON object/],
      ['no templates', { 'manifest.json': manifest, 'weights.json': '{"default_type":"generic"}' }, /needs "templates"/],
      ['default type without template', { 'manifest.json': manifest, 'weights.json': '{"default_type":"x","templates":{"y":"hi"}}' }, /"default_type" must name a type that has a template/],
      ['bad router entry', { 'manifest.json': manifest, 'weights.json': '{"router":{"haiku":{"type":"haiku"}},"default_type":"g","templates":{"g":"hi"}}' }, /router\["haiku"\]/],
    ],
  });

  it('model: routes by summed phrase weights, fills slots, drops optional parts whose slot is empty', () => {
    const model = loadJudgeModel({
      router: { haiku: { type: 'haiku', weight: 1 }, write: { type: 'title', weight: 0.6 } },
      default_type: 'title',
      templates: { haiku: '{Topic} glows\n[[with {keywords}]]\nend', title: 'On {Topic}' },
      topic_markers: ['about'],
      topic_stops: ['.'],
      keyword_markers: ['mention'],
    });
    expect(respond(model, 'Write a haiku about the moon. Mention light and time.')).toBe('The Moon glows\nwith light and time\nend');
    expect(respond(model, 'Write a haiku about the moon.')).toBe('The Moon glows\n\nend');
    expect(respond(model, 'Write about tea.')).toBe('On Tea');
  });

  it('judge: identical responses tie; a compliant answer beats a flawed reference; length alone is discounted by LC', () => {
    const item = { category: 'title' as const, topic: 'tea', keywords: ['time'] };
    expect(preference(item, 'Tea And Time', 'Tea And Time')).toBeCloseTo(0.5);
    expect(preference(item, 'Tea And Time', 'Tea.')).toBeGreaterThan(0.9);
    // Wins driven only by length: raw win rate is high, the length-controlled one is near a tie.
    const diffs = [-5, 5, 10, 15, 20, 25];
    const prefs = diffs.map((d) => 1 / (1 + Math.exp(-Math.tanh(d / 10) * 3)));
    const rawWinRate = prefs.reduce((a, b) => a + b, 0) / prefs.length;
    const { lcWinRate, lengthCoefficient } = lengthControlledWinRate(prefs, diffs);
    expect(rawWinRate).toBeGreaterThan(0.75);
    expect(lengthCoefficient).toBeGreaterThan(1);
    expect(Math.abs(lcWinRate - 0.5)).toBeLessThan(Math.abs(rawWinRate - 0.5) / 2);
  });
});
