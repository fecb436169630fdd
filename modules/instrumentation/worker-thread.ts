import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Starts one of this folder's worker modules (`name`, without extension) from wherever this module
 * runs: the compiled .js next to it in dist/, or, when running from the TypeScript sources
 * (ts-jest, tsx), the .ts file loaded through tsx (a dev dependency), since a worker thread does not
 * inherit the test runner's transform. Used by the file observer's threads and the process tracer.
 */
export function startWorker(name: 'file-watch-worker' | 'file-read-worker' | 'process-tracer-worker', workerData: unknown): Worker {
  const fromSources = import.meta.url.endsWith('.ts');
  const entry = new URL(`./${name}.${fromSources ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSources) return new Worker(entry, { workerData });
  const boot = `const { tsImport } = await import(${JSON.stringify(tsxEsmApi())});\nawait tsImport(${JSON.stringify(entry.href)}, ${JSON.stringify(import.meta.url)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData });
}

/** File URL of tsx's ESM API (`tsx/esm/api`, import condition), read from its package exports. */
function tsxEsmApi(): string {
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  const exported = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: Record<string, unknown> }).exports?.['./esm/api'] as
    | { import?: string | { default?: string } }
    | undefined;
  const target = typeof exported?.import === 'string' ? exported.import : exported?.import?.default;
  if (!target) throw new Error('running from TypeScript sources needs tsx (a dev dependency) for the instrumentation worker threads');
  return pathToFileURL(join(dirname(manifest), target)).href;
}
