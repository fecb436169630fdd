import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { bindable } from './server-view.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'a2rl-server-view-'));
const home = path.join(root, 'home');
for (const dir of ['datasets/alfworld/json_2.1.1', 'keys', 'runs']) mkdirSync(path.join(home, dir), { recursive: true });
mkdirSync(path.join(root, 'elsewhere'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('what a server may have bound', () => {
  const policy = { home };
  it('binds one task\'s dataset folder inside A2RL_HOME (micro ALFWorld games), nothing else of it', () => {
    expect(bindable(path.join(home, 'datasets', 'alfworld'), policy)).toBe(true);
    expect(bindable(path.join(home, 'datasets', 'alfworld', 'json_2.1.1'), policy)).toBe(true);
    expect(bindable(path.join(home, 'datasets'), policy)).toBe(false);
    expect(bindable(path.join(home, 'keys'), policy)).toBe(false);
    expect(bindable(path.join(home, 'runs'), policy)).toBe(false);
    expect(bindable(home, policy)).toBe(false);
    expect(bindable(root, policy)).toBe(false);
  });
  it('binds existing absolute paths outside A2RL_HOME, not the whole of /, /tmp or /root', () => {
    expect(bindable(path.join(root, 'elsewhere'), policy)).toBe(true);
    expect(bindable('relative/path', policy)).toBe(false);
    expect(bindable(path.join(root, 'missing'), policy)).toBe(false);
    for (const whole of ['/', '/tmp', '/root', '/proc']) expect(bindable(whole, policy)).toBe(false);
  });
});
