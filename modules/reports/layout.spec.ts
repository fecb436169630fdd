import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';

// The data flows agent → instrumentation → ledger → projections → reports: folds never depend on how
// their results are written out, so nothing under projections/ may import the reports room.

const root = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

describe('the reports room', () => {
  it('is imported by no projection', () => {
    const offenders = sources(path.join(root, 'projections')).filter((file) =>
      [...readFileSync(file, 'utf8').matchAll(/from '([^']+)'/g)].some((m) => m[1].startsWith('.') && path.resolve(path.dirname(file), m[1]).startsWith(path.join(root, 'modules', 'reports'))),
    );
    expect(offenders.map((f) => path.relative(root, f))).toEqual([]);
  });

  it('holds the renderers: projections/ has no report, chart or CSV writer left', () => {
    const names = sources(path.join(root, 'projections')).map((f) => path.relative(root, f));
    expect(names.filter((n) => /render|chart|csv|report/i.test(n))).toEqual([]);
    expect(names.length).toBeGreaterThan(10);
  });
});
