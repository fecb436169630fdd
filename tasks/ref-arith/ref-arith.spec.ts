import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { describeReferencePack } from '../ref-common/reference-pack-suite.js';
import { refArith } from './index.js';
import { loadArithModel, solve } from './model.js';
import { OBJECTS, PEOPLE } from './problems.js';

const manifest = '{"format":"a2rl-ref/ref-arith/1"}';

describe('ref-arith task pack', () => {
  describeReferencePack({
    pack: refArith,
    agentDir: fileURLToPath(new URL('../../modules/agents/reference/ref-arith/', import.meta.url)),
    baseScoreRange: [5, 30],
    heldoutOnlyWords: [...PEOPLE.heldout.map((p) => p.name), ...OBJECTS.heldout],
    itemKey: 'question',
    agentSubmissions: ['sft-1', 'sft-2', 'rl-3'],
    invalidCheckpoints: [
      ['no manifest', { 'weights.json': '{"cues":{},"default":{"op":"add"}}' }, /no manifest\.json/],
      ['garbage manifest', { 'manifest.json': 'this is not a manifest {', 'weights.json': '{}' }, /manifest\.json is not valid JSON/],
      ['wrong format', { 'manifest.json': '{"format":"a2rl-ref/ref-judge/1"}', 'weights.json': '{}' }, /this task loads "a2rl-ref\/ref-arith\/1"/],
      ['no weights', { 'manifest.json': manifest }, /no weights\.json/],
      ['garbage weights', { 'manifest.json': manifest, 'weights.json': '\u0000\u0001 not weights' }, /weights\.json is not valid JSON/],
      ['unknown op', { 'manifest.json': manifest, 'weights.json': '{"cues":{"found":{"op":"plus","confidence":1}},"default":{"op":"add"}}' }, /cues\["found"\]\.op must be one of add, sub, mul, div/],
      ['no default', { 'manifest.json': manifest, 'weights.json': '{"cues":{}}' }, /needs "default"/],
    ],
  });

  it('model: the most confident matching cue decides; its fixed arg beats the sentence number', () => {
    const model = loadArithModel({
      cues: { more: { op: 'add', confidence: 0.5 }, 'times as': { op: 'mul', confidence: 0.9 }, twice: { op: 'mul', arg: 2, confidence: 0.95 } },
      default: { op: 'sub' },
    });
    expect(solve(model, 'Mia had 10 coins. Then she found 5 more coins. How many coins does Mia have now?')).toBe(15);
    expect(solve(model, 'Mia had 10 coins. She had 3 times as many more. How many?')).toBe(30);
    expect(solve(model, 'Mia had 10 coins. She had twice as many. How many?')).toBe(20);
    expect(solve(model, 'Mia had 10 coins. She sold 4 coins. How many?')).toBe(6);
  });
});
