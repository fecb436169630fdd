import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { chown, lstat, mkdir, open, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';

/**
 * The agent's home: a fresh directory per run, outside the workspace, where its CLI keeps config,
 * sessions and caches. The harness writes the adapter's config files into it before the agent starts
 * and archives it once after the agent has gone. Everything in it is the agent's: read it as hostile.
 */

/** Writes the adapter's files (paths relative to `home`, checked by the agent registry), owned by the agent. */
export async function writeAgentHomeFiles(home: string, files: Record<string, string>, uid?: number): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(home, rel);
    if (!file.startsWith(`${home}${path.sep}`)) throw new Error(`agent home file "${rel}" is outside the home`);
    for (let dir = path.dirname(file); dir !== home; dir = path.dirname(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    }
    await writeFile(file, content, { mode: 0o600 });
    if (uid !== undefined) await chownUpTo(home, file, uid);
  }
}

async function chownUpTo(home: string, file: string, uid: number): Promise<void> {
  for (let p = file; p !== home; p = path.dirname(p)) await chown(p, uid, uid);
}

export interface ArchivedHome {
  files: Array<{ path: string; sha256: string; size: number }>;
  skipped: number;
  skippedReason?: string;
}

/**
 * Stores each regular file of the home (sorted by path, at most `maxFiles`, each at most
 * `maxFileBytes`) through `store` — the run's redacting store, so credentials a CLI wrote into its
 * state never reach the archive. Links, devices and FIFOs are skipped and counted; files are opened
 * without following links, so a link swapped in meanwhile is not read either.
 */
export async function archiveAgentHome(home: string, store: ArtifactStore, limits: { maxFiles: number; maxFileBytes: number }): Promise<ArchivedHome> {
  const found = await listRegularFiles(home, limits.maxFiles);
  const files: ArchivedHome['files'] = [];
  const reasons = new Set<string>(found.reasons);
  let skipped = found.skipped;
  for (const rel of found.files) {
    const bytes = await readNoFollow(path.join(home, rel), limits.maxFileBytes);
    if (typeof bytes === 'string') {
      skipped++;
      reasons.add(bytes);
      continue;
    }
    const put = await store.put(bytes, { sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length });
    files.push({ path: rel, sha256: put.sha256, size: put.size });
  }
  return { files, skipped, ...(reasons.size ? { skippedReason: [...reasons].sort().join('; ').slice(0, 1000) } : {}) };
}

async function listRegularFiles(home: string, maxFiles: number): Promise<{ files: string[]; skipped: number; reasons: string[] }> {
  const files: string[] = [];
  const reasons = new Set<string>();
  let skipped = 0;
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(home, rel), { withFileTypes: true }).catch(() => []);
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(child);
      else if (!entry.isFile()) {
        skipped++;
        reasons.add('not a regular file');
      } else if (files.length >= maxFiles) {
        skipped++;
        reasons.add(`more than ${maxFiles} files`);
      } else files.push(child);
    }
  };
  if ((await lstat(home).catch(() => null))?.isDirectory()) await walk('');
  return { files, skipped, reasons: [...reasons] };
}

/** The file's bytes, or why it was not read. */
async function readNoFollow(file: string, maxBytes: number): Promise<Buffer | string> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return 'unreadable or replaced by a link';
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return 'not a regular file';
    if (st.size > maxBytes) return `larger than ${maxBytes} bytes`;
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}
