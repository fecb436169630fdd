import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { readFileContent, type FileContent } from './file-content.js';

// Which blobs an event references, by part name: read from the payload's shape, not a list of event
// types, so an event added later that carries a `{sha256, size, key}` is openable without a change here.

const SHA256 = /^[0-9a-f]{64}$/;

/** One blob an event references: `part` names it (the payload field: request, response, chunk, content, items, …). */
export interface BlobPart {
  part: string;
  sha256: string;
  size: number;
}

function isRef(value: unknown): value is { sha256: string; size: number } {
  if (!value || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return typeof v.sha256 === 'string' && SHA256.test(v.sha256) && typeof v.size === 'number';
}

/**
 * The blobs an event's payload references, in a stable order: a file revision's content (FileChanged
 * carries its sha256 and size at the top level) as `content`, then every top-level field holding a
 * blob reference, by field name. Lists of blobs (an archived home's files) are not parts.
 */
export function blobParts(event: { type: string; data: unknown }): BlobPart[] {
  const data = (event.data ?? {}) as Record<string, unknown>;
  const parts: BlobPart[] = [];
  if (typeof data.sha256 === 'string' && SHA256.test(data.sha256) && typeof data.size === 'number') parts.push({ part: 'content', sha256: data.sha256, size: data.size });
  for (const key of Object.keys(data).sort()) {
    const value = data[key];
    if (isRef(value)) parts.push({ part: key, sha256: value.sha256, size: value.size });
  }
  return parts;
}

/** The part asked for, else the event's first (the request of a model call, the chunk of an output event). */
export function pickPart(parts: readonly BlobPart[], asked: string | undefined): BlobPart | undefined {
  return asked === undefined ? parts[0] : parts.find((p) => p.part === asked);
}

/** How a blob's text is best shown: JSON (pretty-printed by the page), server-sent events (a streamed model answer), or plain text. */
export type BlobFormat = 'json' | 'sse' | 'text' | 'binary' | 'none';

export function blobFormat(shown: FileContent): BlobFormat {
  if (shown.binary) return 'binary';
  if (shown.content === null) return 'none';
  const text = shown.content.trimStart();
  if (!shown.truncated && (text.startsWith('{') || text.startsWith('['))) {
    try {
      JSON.parse(text);
      return 'json';
    } catch {
      // not JSON after all
    }
  }
  if (/^(event|data):/m.test(text.slice(0, 2000))) return 'sse';
  return 'text';
}

/** A blob read for display: its text (at most 1 MiB, checked against the recorded sha256 when read whole) and how to show it. */
export async function readBlob(artifacts: ArtifactStore, runSeq: number, part: BlobPart): Promise<FileContent & { format: BlobFormat }> {
  const shown = await readFileContent(artifacts, { path: `${part.part} of event ${runSeq}`, sha256: part.sha256, size: part.size, seq: runSeq });
  return { ...shown, format: blobFormat(shown) };
}
