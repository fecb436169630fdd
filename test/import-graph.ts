import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

// The product's import graph, read from the sources (no compiler): which file imports which, grouped
// into folder units — `modules/<x>`, `projections/<x>`, `tasks/<x>`, `infra/<x>`, and `src` whole;
// a file directly under `projections/`, `tasks/`, `modules/` or `infra/` is a unit of its own. test/architecture.spec.ts states the layering rules over it; `node dist/test/import-graph.js`
// prints the figures (cycles, components, violations, largest files).

export const PRODUCT_ROOTS = ['src', 'modules', 'projections', 'tasks', 'infra'];
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs|tsx)$/;

export type ImportKind = 'static' | 'dynamic';

export interface Import {
  specifier: string;
  kind: ImportKind;
}

/** The specifiers a file imports: static imports and re-exports (also multi-line), side-effect imports, import() and require(). */
export function fileImports(text: string): Import[] {
  const staticPatterns = [
    // `import … from '…'` / `export … from '…'`, statements at the start of a line (not in comments).
    /^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*['"]([^'"\n]+)['"]/gm,
    /^[ \t]*import\s*['"]([^'"\n]+)['"]/gm,
  ];
  const dynamicPatterns = [/\bimport\s*\(\s*['"`]([^'"`\n]+)['"`]\s*\)/g, /\brequire\s*\(\s*['"`]([^'"`\n]+)['"`]\s*\)/g];
  const find = (patterns: RegExp[], kind: ImportKind) =>
    patterns.flatMap((re) => [...text.matchAll(re)].map((m) => ({ specifier: m[1], kind })));
  return [...find(staticPatterns, 'static'), ...find(dynamicPatterns, 'dynamic')];
}

export const importSpecifiers = (text: string): string[] => fileImports(text).map((i) => i.specifier);

/** Specs and `testing/` helpers: exempt from the rules (they run real adapters on purpose), never imported by the product. */
export const isTestCode = (rel: string) => /\.spec\.[cm]?[jt]sx?$/.test(rel) || rel.split('/').includes('testing');

/** The folder unit of a repository-relative path, or null outside the product roots. */
export function unitOf(rel: string): string | null {
  const parts = rel.split('/');
  if (!PRODUCT_ROOTS.includes(parts[0])) return null;
  if (parts[0] === 'src') return 'src';
  // A file directly under a root (tasks/task-pack.ts, projections/projection.ts) is a unit of its own:
  // a registry (tasks/index.ts) and the types its entries share are different things.
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts.join('/').replace(SOURCE, '');
}

export interface Edge {
  from: string; // repository-relative file
  to: string; // repository-relative target (resolved to a file where one exists)
  specifier: string;
  kind: ImportKind;
}

export interface ImportGraph {
  files: string[]; // product files (test code left out)
  edges: Edge[]; // relative imports between them, and from them into anything else in the repository
}

const toPosix = (p: string) => p.split(path.sep).join('/');

function sourceFiles(root: string, dir: string): string[] {
  const full = path.join(root, dir);
  if (!existsSync(full)) return [];
  return readdirSync(full, { withFileTypes: true }).flatMap((d) => {
    const rel = `${dir}/${d.name}`;
    if (d.isDirectory()) return d.name === 'node_modules' || d.name === 'dist' ? [] : sourceFiles(root, rel);
    return d.isFile() && SOURCE.test(d.name) && !d.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** `../x.js` → `../x.ts` where the TypeScript source exists (NodeNext writes the emitted name). */
function resolveTarget(root: string, fromRel: string, specifier: string): string {
  const abs = path.resolve(root, path.dirname(fromRel), specifier);
  const candidates = [abs, abs.replace(/\.js$/, '.ts'), abs.replace(/\.js$/, '.tsx'), abs.replace(/\.mjs$/, '.mts'), `${abs}.ts`, path.join(abs, 'index.ts')];
  const found = candidates.find((c) => existsSync(c) && statSync(c).isFile());
  return toPosix(path.relative(root, found ?? abs));
}

/** Every relative import of every product file (test code left out), resolved against `root`. */
export function importGraph(root: string, roots = PRODUCT_ROOTS): ImportGraph {
  const files = roots.flatMap((r) => sourceFiles(root, r)).filter((f) => !isTestCode(f));
  const edges: Edge[] = [];
  for (const from of files) {
    for (const { specifier, kind } of fileImports(readFileSync(path.join(root, from), 'utf8'))) {
      if (!specifier.startsWith('.') && !path.isAbsolute(specifier)) continue; // a package or node: builtin
      edges.push({ from, to: resolveTarget(root, from, specifier), specifier, kind });
    }
  }
  return { files, edges };
}

/** Strongly connected components of a directed graph (Tarjan, iterative), largest first, singletons without a self-loop left out. */
export function cycles(nodes: string[], successors: Map<string, Set<string>>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  for (const start of [...nodes].sort()) {
    if (idx.has(start)) continue;
    const work: Array<{ node: string; next: string[]; i: number }> = [];
    const enter = (node: string) => {
      idx.set(node, index);
      low.set(node, index);
      index += 1;
      stack.push(node);
      onStack.add(node);
      work.push({ node, next: [...(successors.get(node) ?? [])].sort(), i: 0 });
    };
    enter(start);
    while (work.length > 0) {
      const top = work[work.length - 1];
      if (top.i < top.next.length) {
        const w = top.next[top.i++];
        if (!idx.has(w)) enter(w);
        else if (onStack.has(w)) low.set(top.node, Math.min(low.get(top.node)!, idx.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === idx.get(top.node)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== top.node);
        if (component.length > 1 || successors.get(top.node)?.has(top.node)) out.push(component.sort());
      }
    }
  }
  return out.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]));
}

/** The edges between folder units (self-edges left out), with the file imports behind each. */
export function unitEdges(graph: ImportGraph): Map<string, Map<string, Edge[]>> {
  const units = new Map<string, Map<string, Edge[]>>();
  for (const e of graph.edges) {
    const a = unitOf(e.from);
    const b = unitOf(e.to);
    if (!a || !b || a === b) continue;
    if (!units.has(a)) units.set(a, new Map());
    const targets = units.get(a)!;
    if (!targets.has(b)) targets.set(b, []);
    targets.get(b)!.push(e);
  }
  return units;
}

/** Import cycles between folder units: each strongly connected component of the unit graph. */
export function unitCycles(graph: ImportGraph): string[][] {
  const edges = unitEdges(graph);
  const nodes = new Set<string>(graph.files.map((f) => unitOf(f)!).filter(Boolean));
  const successors = new Map<string, Set<string>>();
  for (const [a, targets] of edges) successors.set(a, new Set(targets.keys()));
  return cycles([...nodes], successors);
}

/** Import cycles between files (each strongly connected component of the file graph). */
export function fileCycles(graph: ImportGraph): string[][] {
  const known = new Set(graph.files);
  const successors = new Map<string, Set<string>>();
  for (const e of graph.edges) {
    if (!known.has(e.to)) continue;
    if (!successors.has(e.from)) successors.set(e.from, new Set());
    successors.get(e.from)!.add(e.to);
  }
  return cycles(graph.files, successors);
}

/** A layering rule: files under `from` may not import `to`, or, with `onlyTo`, anything outside it (prefixes of repository-relative paths). */
export interface LayerRule {
  name: string;
  from: string[];
  to?: string[];
  onlyTo?: string[];
  why: string;
}

const under = (rel: string, prefixes: string[]) => prefixes.some((p) => rel === p || rel.startsWith(`${p}/`));

/**
 * The rules docs/architecture.md's layer list states (each one a test in test/architecture.spec.ts).
 * Test code (specs, `testing/`) is exempt from all of them. `src/` has no rule: the shell may import
 * any room, lazily (`import()`) or not, since nothing below it imports it back.
 */
export const LAYER_RULES: LayerRule[] = [
  { name: 'projections import no run machinery, no app shell, no adapters', from: ['projections'], to: ['modules/runs', 'src', 'infra'], why: 'a projection is a fold over events; what it shares with the run session lives with the ledger' },
  { name: 'projections import nothing from the reports room', from: ['projections'], to: ['modules/reports'], why: 'folds never depend on how their results are written out' },
  { name: 'tasks import no run machinery and no app shell (nor adapters)', from: ['tasks'], to: ['modules/runs', 'src', 'infra'], why: 'a task pack gets what it needs as arguments (TaskPaths) from the harness' },
  { name: 'adapters (infra/) import no run machinery and no app shell', from: ['infra'], to: ['modules/runs', 'src'], why: 'an adapter implements a port and is handed its URLs and paths by the composition root' },
  { name: 'modules import no app shell and no adapters', from: ['modules'], to: ['src', 'infra'], why: 'rooms reach adapters and the shell through injected ports (src/composition.ts wires them)' },
  { name: "the ledger (its ports included) imports nothing but itself and the settings", from: ['modules/ledger'], onlyTo: ['modules/ledger', 'modules/settings'], why: 'the ledger is the floor every room stands on: it knows no adapter, no room, no task' },
];

export interface RuleViolation {
  rule: string;
  file: string;
  specifier: string;
  kind: ImportKind;
}

/** Every import that breaks a rule, and every product import of test code. */
export function ruleViolations(graph: ImportGraph, rules = LAYER_RULES): RuleViolation[] {
  const out: RuleViolation[] = [];
  for (const e of graph.edges) {
    for (const r of rules) {
      if (!under(e.from, r.from)) continue;
      const broken = (r.to && under(e.to, r.to)) || (r.onlyTo && !under(e.to, r.onlyTo) && unitOf(e.to) !== null);
      if (broken) out.push({ rule: r.name, file: e.from, specifier: e.specifier, kind: e.kind });
    }
    if (e.to.split('/')[0] === 'test' || isTestCode(e.to)) out.push({ rule: 'the product imports no test code', file: e.from, specifier: e.specifier, kind: e.kind });
  }
  return out;
}
