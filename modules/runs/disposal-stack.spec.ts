import { describe, expect, it } from '@jest/globals';
import { closeInOrder, DisposalStack } from './disposal-stack.js';

describe('DisposalStack', () => {
  it('runs disposers last pushed first, each after the previous one settled', async () => {
    const stack = new DisposalStack();
    const order: string[] = [];
    stack.defer(() => void order.push('cgroup'));
    stack.defer(async () => {
      await new Promise((resolve) => setImmediate(resolve));
      order.push('observers');
    });
    stack.use({ close: async () => void order.push('gateway') });
    await stack.dispose();
    expect(order).toEqual(['gateway', 'observers', 'cgroup']);
  });

  it('a failing disposer skips none of the others; the first failure is thrown once all have run', async () => {
    const stack = new DisposalStack();
    const order: string[] = [];
    stack.defer(() => void order.push('first pushed'));
    stack.defer(() => {
      throw new Error('second');
    });
    stack.defer(() => void order.push('middle'));
    stack.defer(() => Promise.reject(new Error('last')));
    await expect(stack.dispose()).rejects.toThrow('last');
    expect(order).toEqual(['middle', 'first pushed']);
  });

  it('disposes each thing once: a second dispose has nothing left to do', async () => {
    const stack = new DisposalStack();
    let closed = 0;
    stack.defer(() => void closed++);
    await stack.dispose();
    await stack.dispose();
    expect(closed).toBe(1);
  });

  it('closeInOrder closes in the order given and keeps the first failure', async () => {
    const order: string[] = [];
    const resource = (name: string, fail = false) => ({ close: async () => { order.push(name); if (fail) throw new Error(name); } });
    await expect(closeInOrder([resource('lifeline'), resource('grading', true), resource('egress', true), resource('gateway')])).rejects.toThrow('grading');
    expect(order).toEqual(['lifeline', 'grading', 'egress', 'gateway']);
  });
});
