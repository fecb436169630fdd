import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { BlobIntegrityError, eventBlobs, pickEventBlob, readEventBlobHead, type EventBlob } from '../query/event-blob.js';
import { ReplayIntegrityError } from '../replay/errors.js';
import { isBinary, MAX_SHOWN_BYTES, type FileContent } from './file-content.js';

// The dashboard's view of the blobs an event references. Which blobs, by part name, and reading one
// checked against the ledger's sha256 and size are the read side's (modules/query/event-blob.ts, also
// behind `a2rl blob` and `a2rl logs`); here only how a blob is shown: at most 1 MiB, text or binary,
// and the format the page renders it in.

/** One blob an event references: `part` names it (the payload field: request, response, chunk, content, items, …). */
export type BlobPart = EventBlob;

/** The blobs an event's payload references, in a stable order (query/event-blob.ts's eventBlobs). */
export const blobParts: (event: { type: string; data: unknown }) => BlobPart[] = eventBlobs;

/** The part asked for, else the event's first (the request of a model call, the chunk of an output event). */
export const pickPart: (parts: readonly BlobPart[], asked: string | undefined) => BlobPart | undefined = pickEventBlob;

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

/**
 * A blob read for display: its text (at most 1 MiB, checked against the recorded sha256 and size when
 * read whole) and how to show it. A blob missing from the store or not the recorded bytes is a
 * ReplayIntegrityError, as a workspace file's content is (the controllers answer 500 naming it).
 */
export async function readBlob(artifacts: ArtifactStore, runSeq: number, part: BlobPart): Promise<FileContent & { format: BlobFormat }> {
  let read: { bytes: Buffer; truncated: boolean };
  try {
    read = await readEventBlobHead(artifacts, part, `${part.part} of event ${runSeq}`, MAX_SHOWN_BYTES);
  } catch (error) {
    if (error instanceof BlobIntegrityError) throw new ReplayIntegrityError(error.message);
    throw error;
  }
  const { bytes, truncated } = read;
  // Decoded as a stream when cut, so that a multi-byte character cut at the end is dropped, not mangled.
  const shown: FileContent = isBinary(bytes, truncated) ? { binary: true, content: null, truncated } : { binary: false, content: new TextDecoder('utf-8').decode(bytes, { stream: truncated }), truncated };
  return { ...shown, format: blobFormat(shown) };
}
