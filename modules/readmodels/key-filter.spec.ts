import { describe, expect, it } from '@jest/globals';
import { KeyFilter } from './key-filter.js';

describe('KeyFilter', () => {
  it('never forgets a key it was given', () => {
    const filter = new KeyFilter(12);
    const keys = Array.from({ length: 5000 }, (_, i) => `run-${i % 97}/${i}`);
    for (const key of keys) filter.add(key);
    expect(keys.every((key) => filter.mightHave(key))).toBe(true);
  });

  it('answers "absent" for nearly every key it was not given while lightly filled', () => {
    const filter = new KeyFilter(20);
    for (let i = 0; i < 10_000; i++) filter.add(`rebuild-${i}`);
    let maybe = 0;
    for (let i = 0; i < 10_000; i++) if (filter.mightHave(`other-${i}`)) maybe += 1;
    expect(maybe).toBeLessThan(50); // about 0.002% expected; a bad hash would show here
  });

  it('starts empty and refuses a size it cannot hold', () => {
    expect(new KeyFilter(5).mightHave('')).toBe(false);
    expect(() => new KeyFilter(40)).toThrow(RangeError);
  });
});
