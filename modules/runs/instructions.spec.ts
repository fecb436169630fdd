import { agentInstructions } from './instructions.js';

const base = { task: 'gsm8k', baseModel: 'qwen', budgetSeconds: 3600, interactive: false };

describe('agentInstructions', () => {
  it('adds nothing for free mode, so free runs keep the instructions of earlier runs', () => {
    expect(agentInstructions({ ...base, mode: 'free' })).toBe(agentInstructions(base));
    expect(agentInstructions(base)).not.toContain('## Method');
  });

  it('forbids reinforcement learning in sft-only mode', () => {
    const text = agentInstructions({ ...base, mode: 'sft-only' });
    expect(text).toContain('## Method: supervised fine-tuning only');
    expect(text).toMatch(/Do not use reinforcement learning/);
    expect(text.indexOf('## Method')).toBeLessThan(text.indexOf('## Rules'));
  });

  it('expects online RL in rl-oriented mode', () => {
    const text = agentInstructions({ ...base, mode: 'rl-oriented' });
    expect(text).toContain('## Method: online reinforcement learning expected');
    expect(text).not.toContain('Do not use reinforcement learning');
  });
});
