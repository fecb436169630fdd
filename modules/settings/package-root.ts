import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The a2rl checkout (where package.json is), found from this file in modules/settings/ or in
 * dist/modules/settings/: where the package's own files (agents, task backends) are.
 */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json')) || path.basename(dir) === 'dist') {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('cannot find the a2rl package root');
    dir = parent;
  }
  return dir;
}
