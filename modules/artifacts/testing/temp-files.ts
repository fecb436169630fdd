import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The temp files under a filesystem store's tmp/ (in its shard directories or, written before those, in tmp/ itself), sorted by name. */
export async function tempFiles(storeDir: string): Promise<string[]> {
  const entries = await readdir(join(storeDir, 'tmp'), { recursive: true, withFileTypes: true });
  return entries.filter((e) => !e.isDirectory()).map((e) => e.name).sort();
}
