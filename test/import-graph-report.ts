import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fileCycles, importGraph, ruleViolations, unitCycles, unitEdges, unitOf } from './import-graph.js';

// Prints the import graph's figures: `npx tsx test/import-graph-report.ts` (or, built,
// `node dist/test/import-graph-report.js` from the repository root): folder-unit cycles with
// their sizes, file-level cycles, violations per layering rule, who imports the run machinery,
// and the largest files of modules/runs/ and src/commands/. test/architecture.spec.ts is the check;
// this is the picture an engineer reads before moving things.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), process.argv[1]?.includes('/dist/') ? '../..' : '..');
const graph = importGraph(root);
const units = new Set(graph.files.map((f) => unitOf(f)));
console.log(`product files ${graph.files.length}, relative imports ${graph.edges.length} (${graph.edges.filter((e) => e.kind === 'dynamic').length} dynamic), folder units ${units.size}`);
const uc = unitCycles(graph);
console.log(`folder-unit cycles: ${uc.length}${uc.length ? ` (sizes ${uc.map((c) => c.length).join(', ')})` : ''}`);
for (const c of uc) console.log(`  ${c.length}: ${c.join(' ')}`);
const fc = fileCycles(graph);
console.log(`file cycles: ${fc.length}${fc.length ? ` (sizes ${fc.map((c) => c.length).join(', ')})` : ''}`);
for (const c of fc) console.log(`  ${c.join(' ↔ ')}`);
const violations = ruleViolations(graph);
const perRule = new Map<string, number>();
for (const v of violations) perRule.set(v.rule, (perRule.get(v.rule) ?? 0) + 1);
console.log(`layering violations: ${violations.length}`);
for (const [rule, n] of perRule) console.log(`  ${n} × ${rule}`);
for (const v of violations) console.log(`    ${v.file} → ${v.specifier} (${v.kind})`);
const edges = unitEdges(graph);
const importers = [...edges].filter(([, t]) => t.has('modules/runs')).map(([a, t]) => `${a} (${t.get('modules/runs')!.length})`);
console.log(`importers of modules/runs: ${importers.join(', ') || 'none'}`);
const lines = (f: string) => readFileSync(path.join(root, f), 'utf8').split('\n').length;
for (const dir of ['modules/runs/', 'src/commands/']) {
  const top = graph.files.filter((f) => f.startsWith(dir)).map((f) => [f.slice(dir.length), lines(f)] as const).sort((a, b) => b[1] - a[1]).slice(0, 6);
  console.log(`largest in ${dir}: ${top.map(([f, n]) => `${f} ${n}`).join(', ')}`);
}
