import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';

// Ports and adapters, checked: code under modules/, projections/ and tasks/ reaches adapters and
// the app shell only through injected ports, so it never imports infra/ (adapters) or src/ (the
// shell and its composition root, src/composition.ts). Nor does it import test code: test/, a
// `testing/` folder or a spec.
//
// Test code itself (`*.spec.ts` and `testing/` helpers) is exempt: adapter contract suites and
// integration specs deliberately run the real adapters and the app's configuration. The exemption
// cannot leak into the product, because product code may not import test code.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LAYERS = ['modules', 'projections', 'tasks'];
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;

/** The specifiers a file imports: static imports and re-exports (also multi-line), side-effect imports, import() and require(). */
export function importSpecifiers(text: string): string[] {
  const patterns = [
    // `import … from '…'` / `export … from '…'`, statements at the start of a line (not in comments).
    /^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*['"]([^'"\n]+)['"]/gm,
    /^[ \t]*import\s*['"]([^'"\n]+)['"]/gm,
    /\bimport\s*\(\s*['"`]([^'"`\n]+)['"`]\s*\)/g,
    /\brequire\s*\(\s*['"`]([^'"`\n]+)['"`]\s*\)/g,
  ];
  return patterns.flatMap((re) => [...text.matchAll(re)].map((m) => m[1]));
}

const isTestCode = (rel: string) => /\.spec\.[cm]?[jt]s$/.test(rel) || rel.split('/').includes('testing');

export interface Violation {
  file: string;
  specifier: string;
  reason: string;
}

/** Every import from a product file under `layers` into infra/, src/ or test code, relative to `root`. */
export function layerViolations(root: string, layers = LAYERS): Violation[] {
  const violations: Violation[] = [];
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
      const full = path.join(dir, d.name);
      if (d.isDirectory()) return d.name === 'node_modules' ? [] : walk(full);
      return d.isFile() && SOURCE.test(d.name) ? [full] : [];
    });
  for (const layer of layers) {
    for (const file of walk(path.join(root, layer))) {
      const rel = path.relative(root, file).split(path.sep).join('/');
      if (isTestCode(rel)) continue;
      for (const specifier of importSpecifiers(readFileSync(file, 'utf8'))) {
        if (!specifier.startsWith('.') && !path.isAbsolute(specifier)) continue; // a package or node: builtin
        const target = path.relative(root, path.resolve(path.dirname(file), specifier)).split(path.sep).join('/');
        const top = target.split('/')[0];
        const reason =
          top === 'infra' ? 'an adapter: inject its port (provided by src/composition.ts) instead'
          : top === 'src' ? 'the app shell: take what it knows through a port (e.g. SETTINGS) or move the helper into modules/'
          : top === 'test' || isTestCode(target) ? 'test code'
          : null;
        if (reason) violations.push({ file: rel, specifier, reason });
      }
    }
  }
  return violations;
}

describe('layering: modules, projections and tasks reach adapters and the app shell only through ports', () => {
  it('no product file under modules/, projections/ or tasks/ imports infra/, src/ or test code', () => {
    const found = layerViolations(ROOT).map((v) => `${v.file} imports ${v.specifier} (${v.reason})`);
    expect(found).toEqual([]);
  });

  describe('the check itself', () => {
    const fixture = mkdtempSync(path.join(os.tmpdir(), 'a2rl-architecture-'));
    afterAll(() => rmSync(fixture, { recursive: true, force: true }));
    const write = (rel: string, text: string) => {
      mkdirSync(path.dirname(path.join(fixture, rel)), { recursive: true });
      writeFileSync(path.join(fixture, rel), text);
    };

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

    it('reports product files that import infra/, src/ or test code, and lets test code use them', () => {
      write('infra/store.ts', 'export class Store {}\n');
      write('src/config.ts', 'export const config = {};\n');
      write('test/servers/server.ts', 'export const server = 1;\n');
      write('modules/ok/ok.ts', "import { Port } from './port.js';\nimport { Logger } from '@nestjs/common';\nimport path from 'node:path';\n");
      write('modules/bad/store.module.ts', "import { Store } from '../../infra/store.js';\n");
      write('projections/bad/fold.ts', "export { config } from '../../src/config.js';\n");
      write('tasks/bad/index.ts', "const { server } = await import('../../test/servers/server.js');\nimport { fixture } from '../../modules/ok/testing/fixture.js';\n");
      write('modules/ok/ok.spec.ts', "import { Store } from '../../infra/store.js';\nimport { config } from '../../src/config.js';\n");
      write('modules/ok/testing/fixture.ts', "import { Store } from '../../../infra/store.js';\n");
      expect(layerViolations(fixture).map((v) => `${v.file} → ${v.specifier}`).sort()).toEqual([
        'modules/bad/store.module.ts → ../../infra/store.js',
        'projections/bad/fold.ts → ../../src/config.js',
        'tasks/bad/index.ts → ../../modules/ok/testing/fixture.js',
        'tasks/bad/index.ts → ../../test/servers/server.js',
      ]);
    });
  });
});
