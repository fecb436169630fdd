import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { importGraph, importSpecifiers, LAYER_RULES, ruleViolations, unitCycles, unitEdges, unitOf } from './import-graph.js';

// The layer list of docs/architecture.md, checked on the product's import graph (test/import-graph.ts:
// static imports and re-exports, side-effect imports, import() and require() of every product file):
// each rule is a test, and so is "no import cycle between folder units" (modules/<x>, projections/<x>,
// tasks/<x>, infra/<x>, a file directly under one of them, src), static or dynamic.
//
// Test code (`*.spec.ts` and `testing/` helpers) is exempt: adapter contract suites and integration
// specs deliberately run the real adapters and the app's configuration. The exemption cannot leak
// into the product, because product code may not import test code. `npx tsx test/import-graph-report.ts`
// prints the figures (cycles, violations, who imports the run machinery, the largest files).

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const graph = importGraph(ROOT);
const found = (rule: string) => ruleViolations(graph).filter((v) => v.rule === rule).map((v) => `${v.file} imports ${v.specifier} (${v.kind})`);

describe('layering: every rule of the layer list holds', () => {
  it('reads the whole product', () => {
    expect(graph.files.length).toBeGreaterThan(300);
    for (const root of ['src', 'modules', 'projections', 'tasks', 'infra']) expect(graph.files.some((f) => f.startsWith(`${root}/`))).toBe(true);
  });

  it.each(LAYER_RULES.map((r) => [r.name, r.why] as const))('%s', (name) => {
    expect(found(name)).toEqual([]);
  });

  it('the product imports no test code (test/, a testing/ folder, a spec)', () => {
    expect(found('the product imports no test code')).toEqual([]);
  });

  it('no import cycle between folder units, static or dynamic', () => {
    // Each cycle with the imports that close it, so that a failure says which import to move.
    const edges = unitEdges(graph);
    const explained = unitCycles(graph).map((units) =>
      units.flatMap((a) => [...(edges.get(a) ?? [])].filter(([b]) => units.includes(b)).map(([b, es]) => `${a} → ${b}: ${es[0].from} imports ${es[0].specifier} (${es[0].kind})${es.length > 1 ? ` and ${es.length - 1} more` : ''}`)),
    );
    expect(explained).toEqual([]);
  });
});

describe('the check itself', () => {
  const fixture = mkdtempSync(path.join(os.tmpdir(), 'a2rl-architecture-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));
  const write = (rel: string, text: string) => {
    mkdirSync(path.dirname(path.join(fixture, rel)), { recursive: true });
    writeFileSync(path.join(fixture, rel), text);
  };
  const violationsOf = (root: string) => ruleViolations(importGraph(root)).map((v) => `${v.file} → ${v.specifier}`).sort();

  it('finds every import form, and only real imports', () => {
    const text = [
      "import { a } from '../../infra/a.js';",
      'import {\n  b,\n  type C,\n} from "../../src/b.js";',
      "import type { D } from '../d.js';",
      "export { e } from './e.js';",
      "export * from '../f.js';",
      "import '../../infra/side-effect.js';",
      "const g = await import('../g.js');",
      "const h = require('../h.cjs');",
      "// import { x } from '../../infra/in-a-comment.js';",
      " * see also: import y from '../../src/in-a-doc-comment.js'",
      "const text = 'not an import: from \"../../infra/z.js\"';",
    ].join('\n');
    expect(importSpecifiers(text).sort()).toEqual(['../../infra/a.js', '../../infra/side-effect.js', '../../src/b.js', '../d.js', '../f.js', '../g.js', '../h.cjs', './e.js'].sort());
  });

  it('names folder units: a room, a pack, a file directly under a root, the shell whole', () => {
    expect(unitOf('modules/runs/sandbox/x.ts')).toBe('modules/runs');
    expect(unitOf('tasks/ref-arith/index.ts')).toBe('tasks/ref-arith');
    expect(unitOf('tasks/task-pack.ts')).toBe('tasks/task-pack');
    expect(unitOf('src/commands/runs.commands.ts')).toBe('src');
    expect(unitOf('test/e2e/x.spec.ts')).toBeNull();
  });

  it('reports each rule broken, and lets test code and the shell import what they need', () => {
    const root = path.join(fixture, 'rules');
    const w = (rel: string, text: string) => write(path.join('rules', rel), text);
    w('infra/store/store.ts', "import { config } from '../../src/config.js';\nimport { Lock } from '../../modules/runs/lock.js';\nimport { Port } from '../../modules/ledger/port.js';\n");
    w('src/config.ts', "export const config = {};\nconst store = await import('../infra/store/store.js');\nimport { RunService } from '../modules/runs/run.js';\n");
    w('test/servers/server.ts', 'export const server = 1;\n');
    w('modules/runs/run.ts', "import { Port } from '../ledger/port.js';\n");
    w('modules/runs/lock.ts', 'export interface Lock {}\n');
    w('modules/ledger/port.ts', "import { Store } from '../../infra/store/store.js';\nimport type { Lock } from '../runs/lock.js';\nimport { ms } from '../settings/duration.js';\n");
    w('modules/settings/duration.ts', 'export const ms = 1;\n');
    w('modules/reports/render.ts', 'export const render = 1;\n');
    w('modules/ok/ok.ts', "import { Port } from '../ledger/port.js';\nimport { Logger } from '@nestjs/common';\nimport path from 'node:path';\n");
    w('modules/bad/store.module.ts', "import { Store } from '../../infra/store/store.js';\n");
    w('projections/bad/fold.ts', "export { config } from '../../src/config.js';\nimport { render } from '../../modules/reports/render.js';\nconst run = await import('../../modules/runs/run.js');\n");
    w('tasks/bad/index.ts', "const { server } = await import('../../test/servers/server.js');\nimport { fixture } from '../../modules/ok/testing/fixture.js';\nimport { Lock } from '../../modules/runs/lock.js';\n");
    w('modules/ok/ok.spec.ts', "import { Store } from '../../infra/store/store.js';\nimport { config } from '../../src/config.js';\n");
    w('modules/ok/testing/fixture.ts', "import { Store } from '../../../infra/store/store.js';\n");
    expect(violationsOf(root)).toEqual([
      'infra/store/store.ts → ../../modules/runs/lock.js',
      'infra/store/store.ts → ../../src/config.js',
      'modules/bad/store.module.ts → ../../infra/store/store.js',
      'modules/ledger/port.ts → ../../infra/store/store.js', // modules → adapters
      'modules/ledger/port.ts → ../../infra/store/store.js', // and the ledger beyond itself and the settings
      'modules/ledger/port.ts → ../runs/lock.js',
      'projections/bad/fold.ts → ../../modules/reports/render.js',
      'projections/bad/fold.ts → ../../modules/runs/run.js',
      'projections/bad/fold.ts → ../../src/config.js',
      'tasks/bad/index.ts → ../../modules/ok/testing/fixture.js',
      'tasks/bad/index.ts → ../../modules/runs/lock.js',
      'tasks/bad/index.ts → ../../test/servers/server.js',
    ]);
  });

  it('finds a cycle between folder units made by a lazy import(), and none from the shell downwards', () => {
    const root = path.join(fixture, 'cycles');
    const w = (rel: string, text: string) => write(path.join('cycles', rel), text);
    w('modules/a/a.ts', "import { b } from '../b/b.js';\nexport const a = 1;\n");
    w('modules/b/b.ts', "export const b = 1;\nexport const later = () => import('../c/c.js');\n");
    w('modules/c/c.ts', "import { a } from '../a/a.js';\n");
    w('modules/d/d.ts', "import { a } from '../a/a.js';\n");
    w('src/cli.ts', "const d = await import('../modules/d/d.js');\nimport { a } from '../modules/a/a.js';\n");
    w('tasks/index.ts', "import { pack } from './pack/index.js';\n");
    w('tasks/task-pack.ts', 'export interface TaskPack {}\n');
    w('tasks/pack/index.ts', "import type { TaskPack } from '../task-pack.js';\nexport const pack = 1;\n");
    w('modules/a/a.spec.ts', "import { d } from '../d/d.js';\n"); // test code: not part of the graph
    expect(unitCycles(importGraph(root))).toEqual([['modules/a', 'modules/b', 'modules/c']]);
    write('cycles/modules/c/c.ts', 'export const c = 1;\n');
    expect(unitCycles(importGraph(root))).toEqual([]);
  });
});
