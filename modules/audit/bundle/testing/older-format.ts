import type { A2rlEvent } from '../../../ledger/events/catalog.js';
import { canonicalBytes } from '../../../ledger/events/canonical-json.js';
import { blobPath, DESCRIPTOR_FILE, EVENTS_FILE, expectedManifest, MANIFEST_FILE, type BundleFormat } from '../layout.js';

/**
 * Test helper: a current bundle's files as an older format would have held them: the descriptor's
 * format (format 1: no renderer), and only the blobs that format carried, with its manifest.
 */
export function asOlderFormat(files: ReadonlyMap<string, Buffer>, format: Exclude<BundleFormat, 'a2rl.audit-bundle/3'>): Map<string, Buffer> {
  const older = new Map(files);
  const events = files.get(EVENTS_FILE)!.toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as A2rlEvent);
  const { renderer, ...descriptor } = JSON.parse(files.get(DESCRIPTOR_FILE)!.toString('utf8')) as { withCheckpoints: boolean; renderer: string };
  const manifest = expectedManifest(events, descriptor.withCheckpoints, format);
  const kept = new Set(manifest.map((m) => blobPath(m.sha256)));
  for (const name of files.keys()) if (name.startsWith('artifacts/sha256/') && !kept.has(name)) older.delete(name);
  const sizes = new Map((JSON.parse(files.get(MANIFEST_FILE)!.toString('utf8')) as Array<{ sha256: string; size: number }>).map((m) => [m.sha256, m.size]));
  older.set(MANIFEST_FILE, canonicalBytes(manifest.map((m) => ({ ...m, size: m.size ?? sizes.get(m.sha256)! }))));
  older.set(DESCRIPTOR_FILE, canonicalBytes({ ...descriptor, format, ...(format === 'a2rl.audit-bundle/1' ? {} : { renderer }) }));
  return older;
}
