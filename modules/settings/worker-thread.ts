import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts a worker thread on `entry`, the URL of a compiled module next to its caller
 * (`new URL('./x-worker.js', import.meta.url)`). When the caller runs from the TypeScript sources
 * (ts-jest, tsx) there is no .js: the .ts file is loaded through tsx (a dev dependency), since a
 * worker thread does not inherit the test runner's transform. Used by the file observer's threads,
 * the process tracer and `a2rl verify`'s parallel read.
 */
export function startWorker(entry: URL, workerData: unknown, options: Omit<WorkerOptions, 'workerData'> = {}): Worker {
  if (!entry.href.endsWith('.js') || existsSync(fileURLToPath(entry))) return new Worker(entry, { ...options, workerData });
  const source = new URL(entry.href.replace(/\.js$/, '.ts'));
  const boot = `const { tsImport } = await import(${JSON.stringify(tsxEsmApi())});\nawait tsImport(${JSON.stringify(source.href)}, ${JSON.stringify(import.meta.url)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { ...options, workerData });
}

/** File URL of tsx's ESM API (`tsx/esm/api`, import condition), read from its package exports. */
function tsxEsmApi(): string {
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  const exported = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: Record<string, unknown> }).exports?.['./esm/api'] as
    | { import?: string | { default?: string } }
    | undefined;
  const target = typeof exported?.import === 'string' ? exported.import : exported?.import?.default;
  if (!target) throw new Error('running from TypeScript sources needs tsx (a dev dependency) for worker threads');
  return pathToFileURL(join(dirname(manifest), target)).href;
}
